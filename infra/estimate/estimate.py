"""The pre-flight estimate of a training run: memory per device, fit, modelled step time, duration and cost.

``estimate(...)`` is a pure function of the model shape, the batch, the cluster and the implementation of the
step (``step_time.Implementation``: the code as it is, ``AFTER``, unless asked for another); ``estimate_for_config``
reads them from a ``TrainingConfig``. Neither imports anything outside the standard library and ``infra``'s
stdlib-only tables, so the workflow's Plan step (a Lambda function) can run them.

The step time, and so the MFU, tokens per second, duration, cost and the time-limit check, is modelled from the
step's counts (``step_time.py``), never assumed: it is printed as "modelled" wherever a user sees it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from infra.estimate import compute, hardware
from infra.estimate.memory import GIB, OPTIMIZER_BYTES_PER_PARAMETER, Memory, device_memory, recompute_mode
from infra.estimate.stages import stage_parameters
from infra.estimate.step_time import AFTER, Implementation, StepTime, step_time
from infra.instances import INSTANCE_TYPES, InstanceType
from infra.training_code import ModelShape, shape_of, training_module

PRECISIONS = ("bf16", "fp16", "fp32")
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
    recompute: bool | str
    instance_type: str
    instance_count: int
    model_parallel_degree: int
    global_batch_tokens: int
    train_tokens: int
    microbatches: int = 0
    preset: str | None = None  # the preset the shape comes from: its recipe is in the table
    implementation: Implementation = AFTER

    @property
    def instance(self) -> InstanceType:
        return INSTANCE_TYPES[self.instance_type]

    @property
    def data_parallel_degree(self) -> int:
        """Replicas: devices / K. 4 x 8 GPUs with K = 2 -> 16."""
        return _batch().replicas(self.instance.devices, self.instance_count, self.model_parallel_degree)

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per replica per step (``batch.py``): 1,048,576 tokens / (4 x 2,048 x 32) = 4."""
        return _batch().accumulation_steps(
            self.global_batch_tokens, self.micro_batch_size, self.sequence_length, self.data_parallel_degree
        )

    @property
    def pipeline_microbatches(self) -> int:
        """Micro-batches per GPipe pass (M): ``microbatches``, or (0) the fewest that bound the bubble. 1 without a
        pipeline."""
        if self.model_parallel_degree == 1:
            return 1
        return _batch().pipeline_microbatches(self.accumulation_steps, self.microbatches, self.model_parallel_degree)

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
        recompute_mode(self.recompute)  # raises for an unknown mode
        for name in ("sequence_length", "micro_batch_size", "instance_count", "model_parallel_degree", "train_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} {getattr(self, name)}: expected a positive integer")
        devices = self.instance.devices
        if devices % self.model_parallel_degree or self.model_parallel_degree > self.shape.n_layer:
            raise ValueError(
                f"model_parallel_degree {self.model_parallel_degree}: expected a divisor of the {devices} devices "
                f"per instance, at most n_layer ({self.shape.n_layer})"
            )
        if self.model_parallel_degree > 1 and self.shape.architecture != "gpt":
            raise ValueError(
                f"model_parallel_degree {self.model_parallel_degree}: the {self.shape.architecture} decoder has no "
                "pipeline stages (gpt/pipeline/ splits GPT's); expected 1"
            )
        if self.global_batch_tokens <= 0:
            raise ValueError(f"global_batch_tokens {self.global_batch_tokens}: expected a positive integer")
        try:
            _batch().pipeline_microbatches(self.accumulation_steps, self.microbatches, self.model_parallel_degree)
        except _batch().BatchError as error:
            raise ValueError(str(error)) from error


def _batch():
    """``training/contract/batch.py``, the one home of the batch arithmetic."""
    return training_module("batch")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The numbers of one estimate; derived figures are properties. Bytes, seconds (modelled), USD."""

    inputs: EstimateInputs
    parameters: int
    memory: Memory
    model_flops_per_token: int
    hardware_flops_per_token: int
    step: StepTime

    @property
    def capacity_bytes(self) -> int:
        """What the framework can allocate on one device (``hardware.py``), not the marketed size."""
        return hardware.usable_bytes(self.inputs.instance)

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.capacity_bytes

    @property
    def compute_seconds(self) -> float:
        return self.step.compute

    @property
    def allreduce_seconds(self) -> float:
        """The all-reduce time not hidden behind the backward pass."""
        return self.step.allreduce_exposed

    @property
    def step_seconds(self) -> float:
        return self.step.total

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
    def modelled_mfu(self) -> float:
        """Model FLOPs per second over the cluster's 16-bit (or fp32) peak, at the modelled step time."""
        devices = self.inputs.instance.devices * self.inputs.instance_count
        peak = self.inputs.instance.peak_flops(self.inputs.precision) * devices
        return self.tokens_per_second * self.model_flops_per_token / peak

    @property
    def bubble(self) -> float:
        """The GPipe bubble's share of each stage's time: (K - 1) / (M + K - 1); 0 without a pipeline."""
        return compute.bubble_share(self.inputs.model_parallel_degree, self.inputs.pipeline_microbatches)

    def speed_line(self) -> str:
        """One line for summaries: ``modelled 41.2% MFU, 301,000 tokens/s (step 3.48 s; ...)``."""
        return (
            f"modelled {self.modelled_mfu:.1%} MFU, {self.tokens_per_second:,.0f} tokens/s (step "
            f"{self.step_seconds:.2f} s, {self.inputs.implementation.name} implementation; step_time.py)"
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the Plan step's ``summary.fit``; ``layouts.with_suggestions`` adds the suggestions)."""
        return {
            "fits": self.fits,
            "parameters": self.parameters,
            "memory_gib": {k: round(v / GIB, 2) for k, v in _memory_items(self.memory).items()},
            "capacity_gib": round(self.capacity_bytes / GIB, 2),
            "marketed_gib": self.inputs.instance.device_memory_gib,
            "data_parallel_degree": self.inputs.data_parallel_degree,
            "model_parallel_degree": self.inputs.model_parallel_degree,
            "accumulation_steps": self.inputs.accumulation_steps,
            "microbatches": self.inputs.pipeline_microbatches,
            "pipeline_bubble": round(self.bubble, 4),
            "flops_per_token": self.model_flops_per_token,
            "modelled_step_seconds": round(self.step_seconds, 4),
            "modelled_mfu": round(self.modelled_mfu, 4),
            "modelled_tokens_per_second": round(self.tokens_per_second),
            "modelled": self.speed_line(),
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
    recompute: bool | str,
    instance_type: str,
    instance_count: int,
    model_parallel_degree: int = 1,
    global_batch_tokens: int,
    train_tokens: int,
    microbatches: int = 0,
    preset: str | None = None,
    implementation: Implementation = AFTER,
) -> Estimate:
    """Estimates one training run; raises ValueError for a layout that cannot run (see ``EstimateInputs.check``)."""
    return estimate_inputs(EstimateInputs(**{k: v for k, v in locals().items()}))


def estimate_inputs(inputs: EstimateInputs) -> Estimate:
    """``estimate`` for an ``EstimateInputs``."""
    inputs.check()
    shape, seq, k = inputs.shape, inputs.sequence_length, inputs.model_parallel_degree
    implementation = inputs.implementation.as_run(k)
    parameters = shape.parameters(inputs.vocab_size, seq)
    common = {"vocab_size": inputs.vocab_size, "sequence_length": seq, "precision": inputs.precision}
    return Estimate(
        inputs=inputs,
        parameters=parameters,
        memory=device_memory(
            shape,
            **common,
            micro_batch=inputs.micro_batch_size,
            optimizer=inputs.optimizer,
            recompute=inputs.recompute,
            model_parallel_degree=k,
            accumulation_steps=inputs.accumulation_steps,
            pipeline_microbatches=inputs.pipeline_microbatches,
            attention=implementation.memory_attention,
            xla=implementation.xla,
        ),
        model_flops_per_token=compute.model_flops_per_token(shape, parameters, seq),
        hardware_flops_per_token=compute.hardware_flops_per_token(
            shape, parameters, seq, inputs.recompute, pipelined=k > 1
        ),
        step=step_time(
            shape,
            **common,
            parameters=parameters,
            stage_parameters=max(stage_parameters(shape, inputs.vocab_size, seq, k)),
            micro_batch=inputs.micro_batch_size,
            recompute=inputs.recompute,
            instance=inputs.instance,
            instance_count=inputs.instance_count,
            model_parallel_degree=k,
            accumulation_steps=inputs.accumulation_steps,
            pipeline_microbatches=inputs.pipeline_microbatches,
            implementation=implementation,
        ),
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
    recompute: bool | str
    model_parallel_degree: int
    microbatches: int


def estimate_for_config(
    training: TrainingFields, vocab_size: int, *, implementation: Implementation = AFTER
) -> Estimate:
    """The estimate of a stage's (or an execution input's) training configuration, with AdamW. ``recompute`` unset
    (None): the least recompute mode that fits (``layouts.least_recompute``), ``full`` where none does."""

    def at(recompute: bool | str) -> Estimate:
        return estimate(
            shape_of(training.model_preset, training.n_layer, training.d_model, training.n_head),
            vocab_size=vocab_size,
            sequence_length=training.sequence_length,
            micro_batch_size=training.micro_batch_size,
            precision=training.precision,
            recompute=recompute,
            instance_type=training.instance_type,
            instance_count=training.instance_count,
            model_parallel_degree=training.model_parallel_degree,
            global_batch_tokens=training.global_batch_tokens,
            train_tokens=training.train_tokens,
            microbatches=training.microbatches,
            preset=training.model_preset,
            implementation=implementation,
        )

    if training.recompute is not None:
        return at(training.recompute)
    from infra.estimate.layouts import least_recompute  # layouts builds on this module

    return at(least_recompute(at("none").inputs) or "full")


def _memory_items(memory: Memory) -> dict[str, int]:
    return {
        **{f.name: getattr(memory, f.name) for f in dataclasses.fields(memory)},
        "overhead": memory.overhead,
        "total": memory.total,
    }
