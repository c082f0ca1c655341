"""Pre-flight estimate: will this model fit, how should it be split, how long will it take and what will it cost.

Example:
    >>> from infra.training_code import model_presets
    >>> p = estimate(model_presets()["gpt3-1.3b"], vocab_size=50_257, sequence_length=2048, micro_batch_size=4,
    ...          precision="fp16", recompute=False, instance_type="ml.p3.16xlarge", instance_count=1,
    ...          global_batch_tokens=1_048_576, train_tokens=300_000_000_000)
    >>> p.fits
    False

Standard library only (plus infra's stdlib-only tables): the workflow's Plan step imports it in a Lambda function.
Run ``python -m infra.estimate --help`` for the command line.
"""

from infra.estimate.estimate import Estimate, EstimateInputs, estimate, estimate_for_config, estimate_inputs
from infra.estimate.layouts import Suggestion, fit_problem, suggestions, with_suggestions
from infra.estimate.runtime import needed_hours, time_problem

__all__ = [
    "Estimate",
    "EstimateInputs",
    "Suggestion",
    "estimate",
    "estimate_for_config",
    "estimate_inputs",
    "fit_problem",
    "needed_hours",
    "suggestions",
    "time_problem",
    "with_suggestions",
]
