"""SageMaker Debugger settings of the training job: system profiling and the built-in rules.

Only with ``observability.debugger`` on: Debugger is closed to accounts that had not used it by
2026-07-30. The project's own health rules (``training/contract/health.py``, the alarms) work without it.

Plain functions of plain values, so the Plan function builds the same dictionaries the tests check.

Two families of built-in rules exist:

- profiler rules read the system metrics Debugger samples on every instance (GPU, CPU, memory, network,
  I/O); they work with any training image. ``ProfilerReport`` also writes an HTML report that summarizes the
  others.
- tensor rules read tensors that the ``smdebug`` hook saves from inside the training script. The TensorFlow
  2.16+ Deep Learning Containers (and so this project's 2.21 image) do not ship smdebug, so these rules are
  enabled only for an image that has it (:func:`image_has_smdebug_hook`).
"""

from __future__ import annotations

from typing import Any

PROFILER_RULES = (
    "ProfilerReport",
    "LowGPUUtilization",
    "GPUMemoryIncrease",
    "CPUBottleneck",
    "IOBottleneck",
    "BatchSize",
    "LoadBalancing",
)
TENSOR_RULES = ("LossNotDecreasing", "VanishingGradient", "ExplodingTensor")
# The tensor collections the tensor rules read, saved every 500 steps (smdebug_rulesconfig's defaults).
TENSOR_COLLECTIONS = ("losses", "gradients")
TENSOR_SAVE_INTERVAL = "500"
# The last TensorFlow Deep Learning Containers with smdebug; 2.16 and newer do not ship it.
LAST_TENSORFLOW_WITH_SMDEBUG = (2, 15)
REPORT_RULE = "ProfilerReport"


def profiler_config(output_uri: str, interval_ms: int) -> dict[str, Any]:
    """``ProfilerConfig``: system metrics every ``interval_ms`` to ``<output_uri><job>/profiler-output/``."""
    return {"S3OutputPath": output_uri, "ProfilingIntervalInMilliseconds": interval_ms}


def profiler_rule_configurations(rule_image: str, parameters: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """``ProfilerRuleConfigurations``: every rule in :data:`PROFILER_RULES`, each evaluated by ``rule_image``
    with its ``parameters`` (the SDK's, by rule name).

    The configuration name is the rule's name, so a rule's output lands in
    ``<job output>/rule-output/<rule>/`` (see :func:`profiler_report_uri`).
    """
    return [_rule(name, rule_image, parameters[name]) for name in PROFILER_RULES]


def image_has_smdebug_hook(tensorflow_version: str) -> bool:
    """Whether the TensorFlow training image of this version ships the smdebug hook the tensor rules need."""
    major, minor = (int(part) for part in tensorflow_version.split(".")[:2])
    return (major, minor) <= LAST_TENSORFLOW_WITH_SMDEBUG


def tensor_rule_fields(tensorflow_version: str, output_uri: str, rule_image: str) -> dict[str, Any]:
    """``DebugHookConfig`` and ``DebugRuleConfigurations`` for an image with smdebug; nothing otherwise."""
    if not image_has_smdebug_hook(tensorflow_version):
        return {}
    collections = [
        {"CollectionName": name, "CollectionParameters": {"save_interval": TENSOR_SAVE_INTERVAL}}
        for name in TENSOR_COLLECTIONS
    ]
    return {
        "DebugHookConfig": {"S3OutputPath": output_uri, "CollectionConfigurations": collections},
        "DebugRuleConfigurations": [_rule(name, rule_image) for name in TENSOR_RULES],
    }


def debugger_fields(
    enabled: bool,
    tensorflow_version: str,
    output_uri: str,
    interval_ms: int,
    rule_image: str,
    rule_parameters: dict[str, dict[str, str]],
) -> dict:
    """The training request's Debugger fields: profiling, profiler rules (``rule_parameters``: the SDK's, by rule
    name) and (with smdebug) tensor rules; none when ``enabled`` is false (``observability.debugger``)."""
    if not enabled:
        return {}
    return {
        "ProfilerConfig": profiler_config(output_uri, interval_ms),
        "ProfilerRuleConfigurations": profiler_rule_configurations(rule_image, rule_parameters),
        **tensor_rule_fields(tensorflow_version, output_uri, rule_image),
    }


def profiler_report_uri(job_output_uri: str, job_name: str) -> str:
    """Where ``ProfilerReport`` writes its HTML report: under the job's folder of ``OutputDataConfig``.

    SageMaker puts rule output under ``<S3OutputPath>/<job>/rule-output/<RuleConfigurationName>/``; the
    request uses the same ``S3OutputPath`` for the job output and the profiler, so every file of a job
    (model, profiler data, rule output) is in one folder whichever of the two the service reads.
    """
    return f"{job_output_uri}{job_name}/rule-output/{REPORT_RULE}/profiler-output/profiler-report.html"


def _rule(name: str, image: str, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": image,
        "RuleParameters": parameters or {"rule_to_invoke": name},
    }
