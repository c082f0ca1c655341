"""Metric definitions that turn the training log lines into CloudWatch metrics.

``training/train.py`` prints, on the chief worker:

    [train] step=120 loss=4.1234 ppl=61.80 lr=3.000e-04 tokens_per_sec=1234.5 mfu=0.0123
    [valid] step=120 val_loss=4.2000 val_loss_se=0.0310 val_ppl=66.69 sequences=256 val_bpb=1.2345 val_bpb_se=0.0100
            val_loss_web=4.3000 val_bpb_web=1.3000 val_bpb_se_web=0.0200 ...   (a fixed sample of the split; each
                                                                       source of a mix: training/observe/metrics.py)
    [valid_split] step=250 val_loss=4.1500 ... sequences=1122 val_bpb=1.2200 val_bpb_se=0.0040  (whole split, at end)
    [health] step=120 input_wait_pct=38.2 compute_pct=55.1 sync_pct=6.7 step_s=0.512 grad_norm=1.23 skipped=0
             peak_mem_gb=31.2 mem_pct=39 loss_drop_pct=2.1            (one line; the last two when known)
    [heartbeat] step=120 seconds_since_step=61.0                       (every minute, from a thread)

SageMaker applies each regular expression to every log line and records the first group as the metric's value.
A mix adds one metric a source, ``validation:source_bits_per_byte:<source>`` (``metric_definitions``): at most 8
sources keep a job within SageMaker's 40 definitions (``infra/aws_limits.py``).
"""

from __future__ import annotations

from infra.training_code import training_module

NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": rf"\[train\] step=\d+ loss={NUMBER}"},
    {"Name": "train:perplexity", "Regex": rf"\[train\] .*ppl={NUMBER}"},
    {"Name": "train:learning_rate", "Regex": rf"\[train\] .*lr={NUMBER}"},
    {"Name": "train:tokens_per_second", "Regex": rf"\[train\] .*tokens_per_sec={NUMBER}"},
    {"Name": "train:mfu", "Regex": rf"\[train\] .*mfu={NUMBER}"},
    {"Name": "validation:loss", "Regex": rf"\[valid\] step=\d+ val_loss={NUMBER}"},
    {"Name": "validation:perplexity", "Regex": rf"\[valid\] .*val_ppl={NUMBER}"},
    {"Name": "validation:loss_standard_error", "Regex": rf"\[valid\] .*val_loss_se={NUMBER}"},
    {"Name": "validation:split_loss", "Regex": rf"\[valid_split\] step=\d+ val_loss={NUMBER}"},
    {"Name": "validation:split_loss_standard_error", "Regex": rf"\[valid_split\] .*val_loss_se={NUMBER}"},
    {"Name": "validation:split_perplexity", "Regex": rf"\[valid_split\] .*val_ppl={NUMBER}"},
    {"Name": "validation:bits_per_byte", "Regex": rf"\[valid\] .*val_bpb={NUMBER}"},
    {"Name": "validation:bits_per_byte_standard_error", "Regex": rf"\[valid\] .*val_bpb_se={NUMBER}"},
    {"Name": "validation:split_bits_per_byte", "Regex": rf"\[valid_split\] .*val_bpb={NUMBER}"},
    {"Name": "validation:split_bits_per_byte_standard_error", "Regex": rf"\[valid_split\] .*val_bpb_se={NUMBER}"},
    # training/observe/observer.py: the health of each logging window (health rules, alarms)
    {"Name": "health:input_wait_percent", "Regex": rf"\[health\] .*input_wait_pct={NUMBER}"},
    {"Name": "health:compute_percent", "Regex": rf"\[health\] .*compute_pct={NUMBER}"},
    {"Name": "health:sync_percent", "Regex": rf"\[health\] .*sync_pct={NUMBER}"},
    {"Name": "health:step_seconds", "Regex": rf"\[health\] .*step_s={NUMBER}"},
    {"Name": "health:grad_norm", "Regex": rf"\[health\] .*grad_norm={NUMBER}"},
    {"Name": "health:skipped_steps", "Regex": rf"\[health\] .*skipped={NUMBER}"},
    {"Name": "health:peak_memory_gb", "Regex": rf"\[health\] .*peak_mem_gb={NUMBER}"},
    {"Name": "health:memory_percent", "Regex": rf"\[health\] .*mem_pct={NUMBER}"},
    {"Name": "health:loss_drop_percent", "Regex": rf"\[health\] .*loss_drop_pct={NUMBER}"},
    {"Name": "health:seconds_since_step", "Regex": rf"\[heartbeat\] .*seconds_since_step={NUMBER}"},
]

# + a source's name. The dashboard finds every source's by the token SOURCE_TOKEN, which no other definition has.
SOURCE_METRIC = "validation:source_bits_per_byte:"
SOURCE_TOKEN = "source"


def metric_definitions(sources: list[str]) -> list[dict[str, str]]:
    """The job's definitions: ``METRIC_DEFINITIONS`` and each source's bits per byte on the [valid] line."""
    key = training_module("hparams").metric_key
    return METRIC_DEFINITIONS + [
        {"Name": SOURCE_METRIC + name, "Regex": rf"\[valid\] .* val_bpb_{key(name)}={NUMBER}"} for name in sources
    ]
