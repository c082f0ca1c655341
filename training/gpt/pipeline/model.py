"""A GPT whose blocks are split into pipeline stages, each stage's weights and compute on its own device.

    devices[0]      token + position embeddings, blocks of stage 0
    devices[k]      blocks of stage k                         (``partition.stage_blocks``: balanced by parameters)
    devices[K-1]    blocks of stage K-1, final LayerNorm, logits (reads the tied token embedding from devices[0])

It is a ``GPT`` with the same variables, in the same order, under the same names: checkpoints and
``get_weights`` move between a pipelined and a single-device model unchanged, and ``get_config`` describes a
plain GPT (exports are single-device copies). Only where the variables live and where the ops run differ:

- weights: each stage's layers are built inside ``tf.device(devices[k])`` (TensorFlow places a variable
  where it is created). The dropout SeedGenerators create their state when a block is constructed, before
  any build; a variable creator places those on their block's device too.
- compute: ``stage_call(k, x)`` runs stage k inside ``tf.device(devices[k])``; TensorFlow copies the hidden
  state [batch, T, d] between devices. ``call`` chains the stages (one micro-batch at a time: no overlap);
  ``gpipe.py`` overlaps micro-batches across stages for training.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from gpt.model import GPT
from gpt.pipeline.partition import stage_blocks


class PipelinedGPT(GPT):
    """A GPT split into ``len(devices)`` pipeline stages.

    Args:
        devices: one TensorFlow device per stage, e.g. ``["/GPU:0", "/GPU:1"]``; at most ``n_layer`` of them.
        Every other argument is ``GPT``'s.

    Example:
        >>> model = PipelinedGPT.from_preset("tiny", vocab_size=512, sequence_length=32, devices=["/CPU:0", "/CPU:1"])
        >>> model.stage_blocks
        [range(0, 1), range(1, 2)]
        >>> model.blocks[1].fc.kernel.value.device
        '/job:localhost/replica:0/task:0/device:CPU:1'
    """

    def __init__(self, vocab_size: int, sequence_length: int, n_layer: int, d_model: int, *args, devices, **kwargs):
        devices = list(devices)
        blocks = stage_blocks(n_layer, d_model, vocab_size, sequence_length, len(devices))
        # GPT.__init__ constructs and builds every layer, so the placement must be known before it runs.
        self.devices, self.stage_blocks = devices, blocks
        block_devices = [devices[k] for k, run in enumerate(blocks) for _ in run]
        # Variables created at construction (not at build), in construction order: one dropout SeedGenerator per
        # block, then the model's embedding-dropout one. ``_check_placement`` verifies the result.
        construction_devices = [*block_devices, devices[0]]

        def place_seed_states(next_creator, **variable_kwargs):
            if variable_kwargs.get("name") == "seed_generator_state" and construction_devices:
                with tf.device(construction_devices.pop(0)):
                    return next_creator(**variable_kwargs)
            return next_creator(**variable_kwargs)

        kwargs.setdefault("name", "gpt")  # GPT's variable paths ("gpt/h0/...")
        with tf.variable_creator_scope(place_seed_states):
            super().__init__(vocab_size, sequence_length, n_layer, d_model, *args, **kwargs)
        self._check_placement()

    @property
    def num_stages(self) -> int:
        return len(self.devices)

    def build(self, input_shape):
        """Builds each stage's layers on its device (GPT.build's layers, in GPT.build's order)."""
        hidden = (*input_shape[:2], self.d_model)
        last = len(self.devices) - 1
        for k, (device, blocks) in enumerate(zip(self.devices, self.stage_blocks, strict=True)):
            with tf.device(device):
                if k == 0:
                    self.token_embedding.build(input_shape)
                    self.position_embedding.build((self.sequence_length,))
                for i in blocks:
                    self.blocks[i].build(hidden)
                if k == last:
                    self.ln_f.build(hidden)
        self.built = True

    def stage_layers(self, stage: int) -> list:
        """The layers whose weights stage ``stage`` holds."""
        layers = [self.token_embedding, self.position_embedding] if stage == 0 else []
        layers += [self.blocks[i] for i in self.stage_blocks[stage]]
        return layers + ([self.ln_f] if stage == self.num_stages - 1 else [])

    def stage_variables(self, stage: int) -> list:
        """Trainable variables held by stage ``stage``'s device, in ``trainable_variables`` order."""
        held = {id(v) for layer in self.stage_layers(stage) for v in layer.trainable_variables}
        return [v for v in self.trainable_variables if id(v) in held]

    def stage_inputs(self, stage: int) -> list:
        """Trainable variables that stage ``stage`` reads: its own, and on the last stage the tied token embedding."""
        variables = self.stage_variables(stage)
        if stage == self.num_stages - 1 and stage > 0:
            variables.append(self.token_embedding.embeddings)
        return variables

    def stage_call(
        self, stage: int, x: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None
    ) -> tf.Tensor:
        """Stage ``stage`` on its device: token ids [B, T] -> hidden [B, T, d] -> ... -> logits [B, T, vocab].

        ``GPT.call``'s arithmetic, split at the stage boundaries; ``stream``: the replica drawing the dropout masks.
        """
        with tf.device(self.devices[stage]):
            if stage == 0:
                x = self.embed(x, training, stream)
            for i in self.stage_blocks[stage]:
                x = self.blocks[i](x, training=training, stream=stream)
            if stage == self.num_stages - 1:
                x = self.logits(x)  # the tied output projection reads the embedding across from devices[0]
        return x

    def call(self, token_ids: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None) -> tf.Tensor:
        x = token_ids
        for stage in range(self.num_stages):
            x = self.stage_call(stage, x, training=training, stream=stream)
        return x

    def _check_placement(self) -> None:
        """Raises if a variable is not on its stage's device (e.g. GPT began creating variables in another order)."""
        for k, device in enumerate(self.devices):
            expected = tf.DeviceSpec.from_string(device)
            seeds = [self.blocks[i].seed_generator.state for i in self.stage_blocks[k]]
            seeds += [self.seed_generator.state] if k == 0 else []
            for variable in [*self.stage_variables(k), *seeds]:
                if not same_device(variable, expected):
                    where = variable_device(variable)
                    raise RuntimeError(f"{variable.path} is on {where}, not on stage {k}'s {device}")


def variable_device(variable) -> str:
    """The device of a Keras variable (its ``value``, a tf.Variable) or of a tf.Variable."""
    return variable.value.device if isinstance(variable, keras.Variable) else variable.device


def same_device(variable, device: tf.DeviceSpec) -> bool:
    """Whether ``variable`` lives on ``device`` (compared by type and index: "/GPU:1" matches ".../device:GPU:1")."""
    actual = tf.DeviceSpec.from_string(variable_device(variable))
    return (actual.device_type, actual.device_index) == (device.device_type, device.device_index or 0)


def stage_of(variable, devices: Sequence[str]) -> int:
    """The index of the stage device that holds ``variable``."""
    for k, device in enumerate(devices):
        if same_device(variable, tf.DeviceSpec.from_string(device)):
            return k
    raise ValueError(f"{getattr(variable, 'path', variable)} is on none of {list(devices)}")
