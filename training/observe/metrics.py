"""Log lines that CloudWatch metric definitions parse, and model FLOPs utilisation.

    [train] step=120 loss=4.1234 ppl=61.80 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123 | step 120 of 250, 2 min 10 s
            left   (after the metrics, for people: the steps since the first at their pace so far)
    [valid] step=120 val_loss=4.2000 val_loss_se=0.0310 val_ppl=66.69 sequences=256 val_bpb=1.2345 val_bpb_se=0.0100
    [valid_split] step=250 val_loss=4.1500 ... sequences=1122 val_bpb=...  (the whole split, at the end)
            a split of several sources (a mix) adds each one's: val_loss_<source>=4.3000 val_bpb_<source>=1.3000
            val_bpb_se_<source>=0.0200 (a '-' of the name written '_')
    [health] step=120 input_wait_pct=38.2 compute_pct=55.1 sync_pct=6.7 step_s=0.512 grad_norm=1.23 skipped=0 ...

``val_loss`` is the mean token loss of the sequences evaluated and ``val_loss_se`` its standard error over them:
the standard deviation of the sequences' mean losses / sqrt(sequences), the sequences taken as independent draws
(neighbouring sequences of one document are not quite; the error is somewhat larger than this says).

``val_bpb`` is bits per byte, the tokenizer-independent figure of The Pile's paper and its successors: the nats
summed over every target token / (ln 2 x the UTF-8 bytes those tokens decode to; ``<|endoftext|>`` decodes to
none). ``val_bpb_se`` is its standard error as a ratio estimate over the sequences (the delta method):
sqrt(sum_i (L_i - bpb' B_i)^2 / (n (n - 1))) / mean(B) / ln 2, with L_i and B_i a sequence's nats and bytes.

MFU = achieved FLOPs / peak FLOPs = tokens_per_sec x flops_per_token / (replicas x peak per device),
with flops_per_token = 6N + 12 x layers x context x width (``gpt.presets.flops_per_token``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys

import tensorflow as tf
from contract.hparams import metric_key

# Dense bf16/fp16 tensor-core peaks (no sparsity), TFLOPS per device, from the vendors' data sheets.
GPU_PEAK_TFLOPS = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "A10G": 70.0,
    "L40S": 362.0,
    "L4": 121.0,
    "V100": 125.0,
    "T4": 65.0,
}
# A CPU has no single peak; a nominal 2 AVX-512 FMA units x 16 fp32 lanes x 2 FLOPs x 2.5 GHz per core.
CPU_CORE_PEAK_TFLOPS = 2 * 16 * 2 * 2.5e9 / 1e12


def perplexity(loss: float) -> float:
    """exp(loss), capped so a diverged loss prints as a huge number rather than overflowing."""
    return math.exp(min(loss, 700.0))


def train_line(
    step: int, loss: float, lr: float, tokens_per_sec: float, mfu: float, max_steps: int = 0, seconds_left: float = -1
) -> str:
    """The metrics, then for people ``| step N of M, T left`` (T: ``seconds_left``, when it is known)."""
    line = (
        f"[train] step={step} loss={loss:.4f} ppl={perplexity(loss):.2f} lr={lr:.3e} "
        f"tokens_per_sec={tokens_per_sec:.1f} mfu={mfu:.4f}"
    )
    if max_steps:
        line += f" | step {step} of {max_steps}" + (f", {duration(seconds_left)} left" if seconds_left >= 0 else "")
    return line


def duration(seconds: float) -> str:
    """``45 s``, ``2 min 10 s``, ``3 h 05 min``: a time left as people read it."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The mean token loss of evaluated sequences (each of the same length), its standard error, their number,
    and bits per byte with its standard error (None where the bytes of the tokens were not known); for a split of
    several sources, each source's own (``sources``, by name)."""

    loss: float
    standard_error: float
    sequences: int
    bits_per_byte: float | None = None
    bits_per_byte_se: float | None = None
    sources: dict[str, Evaluation] = dataclasses.field(default_factory=dict)  # each source's, for a mix

    @classmethod
    def from_sums(cls, total: float, squares: float, count: float, *byte_sums: float) -> Evaluation:
        """From the sum of the sequences' mean losses, the sum of their squares, and their number; then, if given,
        the sums over sequences of L, B, L^2, B^2 and L B (L: a sequence's nats summed over its target tokens,
        B: the UTF-8 bytes those tokens decode to)."""
        mean = total / count
        variance = max(0.0, squares - count * mean * mean) / max(count - 1, 1)  # the sample variance
        evaluation = cls(mean, math.sqrt(variance / count), round(count))
        if not byte_sums or byte_sums[1] <= 0:
            return evaluation
        nats, size, nats2, size2, cross = byte_sums
        ratio = nats / size  # nats per byte
        residuals = max(0.0, nats2 - 2 * ratio * cross + ratio * ratio * size2)  # sum (L - ratio B)^2
        se = math.sqrt(residuals / max(count * (count - 1), 1)) / (size / count)
        return dataclasses.replace(evaluation, bits_per_byte=ratio / math.log(2), bits_per_byte_se=se / math.log(2))


def valid_line(step: int, evaluation: Evaluation, tag: str = "valid") -> str:
    """``[valid]`` (the fixed sample) or ``[valid_split]`` (the whole validation split)."""
    e = evaluation
    line = (
        f"[{tag}] step={step} val_loss={e.loss:.4f} val_loss_se={e.standard_error:.4f} "
        f"val_ppl={perplexity(e.loss):.2f} sequences={e.sequences}"
    )
    if e.bits_per_byte is not None:
        line += f" val_bpb={e.bits_per_byte:.4f} val_bpb_se={e.bits_per_byte_se:.4f}"
    for source, s in e.sources.items():
        key = metric_key(source)
        line += f" val_loss_{key}={s.loss:.4f}"
        if s.bits_per_byte is not None:
            line += f" val_bpb_{key}={s.bits_per_byte:.4f} val_bpb_se_{key}={s.bits_per_byte_se:.4f}"
    return line


def emit(line: str) -> None:
    """One line on stdout, flushed at once (CloudWatch reads the stream as it comes)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def device_peak_tflops() -> float:
    """Peak TFLOPS of one local accelerator (the first GPU's name looked up above), else of this CPU."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "")
        for key, peak in GPU_PEAK_TFLOPS.items():
            if key in name:
                return peak
        return GPU_PEAK_TFLOPS["A100"]  # unknown GPU: an A100's figure keeps the ratio readable
    return (os.cpu_count() or 1) * CPU_CORE_PEAK_TFLOPS


def model_flops_utilisation(tokens_per_sec: float, flops_per_token: float, devices: int, peak_tflops: float) -> float:
    return tokens_per_sec * flops_per_token / (devices * peak_tflops * 1e12)


def health_line(step: int, fields: dict[str, float | None]) -> str:
    """``[health] step=120 input_wait_pct=38.0 ...``: the window's health numbers (None values left out)."""
    return f"[health] step={step} " + " ".join(f"{k}={v:.4g}" for k, v in fields.items() if v is not None)
