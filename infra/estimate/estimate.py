"""The pre-flight estimate of a training run: memory per device, fit, step time, duration and cost.

``estimate(...)`` is a pure function of the model shape, the batch and the cluster; ``estimate_for_config`` reads
them from a ``TrainingConfig``. Neither imports anything outside the standard library and ``infra``'s
stdlib-only tables, so the workflow's Plan step (a Lambda function) can run them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from infra.estimate import compute
from infra.estimate.memory import GIB, OPTIMIZER_BYTES_PER_PARAMETER, Memory, device_memory
from infra.instances import INSTANCE_TYPES, InstanceType
from infra.presets import ModelShape, shape_of
from infra.training_code import training_module

PRECISIONS = ("bf16", "fp16", "fp32")
DEFAULT_MFU = 0.4  # assumed, not measured (2026-12-01, no GPU lent): bench/gpu_train_bench.py measures it on an H200
SECONDS_PER_DAY = 86_400


@dataclasses.dataclass(frozen=True)
class EstimateInputs:
    """Everything an estimate depends on. ``model_parallel_degree`` is the number of pipeline stages (K)."""

    shape: ModelShape
    vocab_size: int
    sequence_length: int
    micro_batch_size: int
    precision: str
    optimizer: str
    recompute: bool
    instance_type: str
    instance_count: int
    model_parallel_degree: int
    global_batch_tokens: int
    train_tokens: int
    mfu: float
    microbatches: int = 0
    preset: str | None = None  # the preset the shape comes from: its recipe is in the table

    @property
    def instance(self) -> InstanceType:
        return INSTANCE_TYPES[self.instance_type]

    @property
    def data_parallel_degree(self) -> int:
        """Replicas: devices / K. 4 x 8 GPUs with K = 2 -> 16."""
        return self.instance.devices * self.instance_count // self.model_parallel_degree

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per replica per step (``batch.py``): 1,048,576 tokens / (4 x 2,048 x 32) = 4."""
        return _batch().accumulation_steps(
            self.global_batch_tokens, self.micro_batch_size, self.sequence_length, self.data_parallel_degree
        )

    @property
    def pipeline_microbatches(self) -> int:
        """Micro-batches per GPipe pass (M): ``microbatches``, or all of a step's (0). 1 without a pipeline."""
        if self.model_parallel_degree == 1:
            return 1
        return _batch().pipeline_microbatches(self.accumulation_steps, self.microbatches)

    def check(self) -> None:
        """Raises ValueError when the inputs describe no runnable layout."""
        if self.instance_type not in INSTANCE_TYPES:
            raise ValueError(f"unknown instance type {self.instance_type!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}")
        if self.optimizer not in OPTIMIZER_BYTES_PER_PARAMETER:
            raise ValueError(
                f"optimizer {self.optimizer!r}: expected one of {', '.join(OPTIMIZER_BYTES_PER_PARAMETER)}"
            )
        if not 0 < self.mfu <= 1:
            raise ValueError(f"mfu {self.mfu}: expected a fraction in (0, 1]")
        for name in ("sequence_length", "micro_batch_size", "instance_count", "model_parallel_degree", "train_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} {getattr(self, name)}: expected a positive integer")
        devices = self.instance.devices
        if devices % self.model_parallel_degree or self.model_parallel_degree > self.shape.n_layer:
            raise ValueError(
                f"model_parallel_degree {self.model_parallel_degree}: expected a divisor of the {devices} devices "
                f"per instance, at most n_layer ({self.shape.n_layer})"
            )
        if self.global_batch_tokens <= 0:
            raise ValueError(f"global_batch_tokens {self.global_batch_tokens}: expected a positive integer")
        try:
            _batch().pipeline_microbatches(self.accumulation_steps, self.microbatches)
        except _batch().BatchError as error:
            raise ValueError(str(error)) from error


def _batch():
    """``training/contract/batch.py``, the one home of the batch arithmetic."""
    return training_module("batch")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The numbers of one estimate; derived figures are properties. Bytes, seconds, USD."""

    inputs: EstimateInputs
    parameters: int
    memory: Memory
    model_flops_per_token: int
    hardware_flops_per_token: int
    compute_seconds: float
    allreduce_seconds: float

    @property
    def capacity_bytes(self) -> int:
        return self.inputs.instance.device_memory_gib * GIB

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.capacity_bytes

    @property
    def step_seconds(self) -> float:
        return self.compute_seconds + self.allreduce_seconds

    @property
    def tokens_per_second(self) -> float:
        return self.inputs.global_batch_tokens / self.step_seconds

    @property
    def tokens_per_day(self) -> float:
        return self.tokens_per_second * SECONDS_PER_DAY

    @property
    def train_hours(self) -> float:
        return self.inputs.train_tokens / self.tokens_per_second / 3600

    @property
    def train_days(self) -> float:
        return self.train_hours / 24

    @property
    def cost_on_demand(self) -> float:
        return self.train_hours * self.inputs.instance_count * self.inputs.instance.price_per_hour

    @property
    def cost_spot(self) -> float:
        return self.train_hours * self.inputs.instance_count * self.inputs.instance.spot_price_per_hour

    @property
    def achieved_mfu(self) -> float:
        """Model FLOPs per second over the cluster's peak: below ``mfu`` with recomputation, pipelines, network."""
        devices = self.inputs.instance.devices * self.inputs.instance_count
        peak = self.inputs.instance.peak_flops(self.inputs.precision) * devices
        return self.tokens_per_second * self.model_flops_per_token / peak

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the Plan step's ``summary.fit``; ``layouts.with_suggestions`` adds the suggestions)."""
        return {
            "fits": self.fits,
            "parameters": self.parameters,
            "memory_gib": {k: round(v / GIB, 2) for k, v in _memory_items(self.memory).items()},
            "capacity_gib": self.inputs.instance.device_memory_gib,
            "data_parallel_degree": self.inputs.data_parallel_degree,
            "model_parallel_degree": self.inputs.model_parallel_degree,
            "accumulation_steps": self.inputs.accumulation_steps,
            "microbatches": self.inputs.pipeline_microbatches,
            "flops_per_token": self.model_flops_per_token,
            "step_seconds": round(self.step_seconds, 4),
            "tokens_per_day": round(self.tokens_per_day),
            "train_days": round(self.train_days, 2),
            "cost_on_demand_usd": round(self.cost_on_demand, 2),
            "cost_spot_usd": round(self.cost_spot, 2),
        }


def estimate(
    shape: ModelShape,
    *,
    vocab_size: int,
    sequence_length: int,
    micro_batch_size: int,
    precision: str,
    optimizer: str = "adamw",
    recompute: bool,
    instance_type: str,
    instance_count: int,
    model_parallel_degree: int = 1,
    global_batch_tokens: int,
    train_tokens: int,
    mfu: float = DEFAULT_MFU,
    microbatches: int = 0,
    preset: str | None = None,
) -> Estimate:
    """Estimates one training run; raises ValueError for a layout that cannot run (see ``EstimateInputs.check``)."""
    return estimate_inputs(EstimateInputs(**{k: v for k, v in locals().items()}))


def estimate_inputs(inputs: EstimateInputs) -> Estimate:
    """``estimate`` for an ``EstimateInputs``."""
    inputs.check()
    shape, seq = inputs.shape, inputs.sequence_length
    parameters = shape.parameters(inputs.vocab_size, seq)
    hardware = compute.hardware_flops_per_token(shape, parameters, seq, inputs.recompute)
    tokens_per_replica = inputs.global_batch_tokens // inputs.data_parallel_degree
    pipeline = compute.pipeline_factor(inputs.model_parallel_degree, inputs.pipeline_microbatches)
    peak = inputs.instance.peak_flops(inputs.precision)
    return Estimate(
        inputs=inputs,
        parameters=parameters,
        memory=device_memory(
            shape,
            vocab_size=inputs.vocab_size,
            sequence_length=seq,
            micro_batch=inputs.micro_batch_size,
            precision=inputs.precision,
            optimizer=inputs.optimizer,
            recompute=inputs.recompute,
            model_parallel_degree=inputs.model_parallel_degree,
            accumulation_steps=inputs.accumulation_steps,
            microbatches=inputs.microbatches,
        ),
        model_flops_per_token=compute.model_flops_per_token(shape, parameters, seq),
        hardware_flops_per_token=hardware,
        compute_seconds=pipeline
        * compute.compute_seconds(tokens_per_replica, hardware, inputs.model_parallel_degree, peak, inputs.mfu),
        allreduce_seconds=compute.allreduce_seconds(parameters, inputs.instance_count, inputs.instance.network_gbps),
    )


class TrainingFields(Protocol):
    """The fields of ``infra.config.TrainingConfig`` an estimate reads (a Protocol: no import cycle with config)."""

    model_preset: str
    n_layer: int | None
    d_model: int | None
    n_head: int | None
    sequence_length: int
    global_batch_tokens: int
    micro_batch_size: int
    train_tokens: int
    precision: str
    instance_type: str
    instance_count: int
    recompute: bool
    model_parallel_degree: int
    microbatches: int


def estimate_for_config(training: TrainingFields, vocab_size: int, *, mfu: float = DEFAULT_MFU) -> Estimate:
    """The estimate of a stage's (or an execution input's) training configuration, with AdamW."""
    return estimate(
        shape_of(training.model_preset, training.n_layer, training.d_model, training.n_head),
        vocab_size=vocab_size,
        sequence_length=training.sequence_length,
        micro_batch_size=training.micro_batch_size,
        precision=training.precision,
        recompute=training.recompute,
        instance_type=training.instance_type,
        instance_count=training.instance_count,
        model_parallel_degree=training.model_parallel_degree,
        global_batch_tokens=training.global_batch_tokens,
        train_tokens=training.train_tokens,
        mfu=mfu,
        microbatches=training.microbatches,
        preset=training.model_preset,
    )


def _memory_items(memory: Memory) -> dict[str, int]:
    return {
        **{f.name: getattr(memory, f.name) for f in dataclasses.fields(memory)},
        "overhead": memory.overhead,
        "total": memory.total,
    }
