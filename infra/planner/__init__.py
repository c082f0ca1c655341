"""Pre-flight planner: will this model fit, how should it be split, how long will it take and what will it cost.

Example:
    >>> from infra.presets import model_presets
    >>> p = plan(model_presets()["gpt3-1.3b"], vocab_size=50_257, sequence_length=2048, micro_batch_size=4,
    ...          precision="fp16", recompute=False, instance_type="ml.p3.16xlarge", instance_count=1,
    ...          global_batch_tokens=1_048_576, train_tokens=300_000_000_000)
    >>> p.fits
    False

Standard library only (plus infra's stdlib-only tables): the workflow's Plan step imports it in a Lambda function.
Run ``python -m infra.planner --help`` for the command line.
"""

from infra.planner.plan import Plan, PlanInputs, Suggestion, fit_problem, plan, plan_for_config, plan_inputs

__all__ = ["Plan", "PlanInputs", "Suggestion", "fit_problem", "plan", "plan_for_config", "plan_inputs"]
