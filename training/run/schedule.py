"""Learning rate: linear warm-up, then cosine decay to a floor (the peak and the steps: contract/recipe.py).

lr(step) = peak x step / warmup                                   for step < warmup
         = floor + (peak - floor) x (1 + cos(pi x progress)) / 2  after, progress 0 -> 1 at decay_steps
floor    = peak x min_lr_ratio
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="gpt")
class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``peak`` over ``warmup_steps``, cosine decay to ``peak x min_ratio`` at ``decay_steps``.

    Args:
        peak: the highest learning rate, reached at the end of warm-up.
        warmup_steps: steps of linear warm-up (0: start at the peak).
        decay_steps: the step where the cosine reaches the floor (usually max_steps); constant after.
        min_ratio: the floor as a fraction of the peak.

    Example:
        >>> schedule = WarmupCosine(peak=3e-4, warmup_steps=10, decay_steps=100, min_ratio=0.1)
        >>> round(float(schedule(10)), 9), round(float(schedule(100)), 9)  # float32
        (0.0003, 3e-05)
    """

    def __init__(self, peak: float, warmup_steps: int, decay_steps: int, min_ratio: float = 0.1):
        self.peak, self.warmup_steps, self.decay_steps, self.min_ratio = peak, warmup_steps, decay_steps, min_ratio

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        floor = self.peak * self.min_ratio
        progress = tf.clip_by_value((step - self.warmup_steps) / max(self.decay_steps - self.warmup_steps, 1), 0.0, 1.0)
        cosine = floor + (self.peak - floor) * 0.5 * (1.0 + tf.cos(math.pi * progress))
        return tf.where(step < self.warmup_steps, self.peak * step / warmup, cosine)

    def get_config(self) -> dict:
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "min_ratio": self.min_ratio,
        }
