"""The toolkit's conventions the local training job follows."""

from infra.workflow.metrics import METRIC_DEFINITIONS
from infra.workflow.requests import encode_hyperparameters
from local.jobs.training import decode_hyperparameters, final_metrics, to_cmd_args


def test_hyperparameters_round_trip_as_the_toolkit_passes_them():
    encoded = encode_hyperparameters(
        {"model_preset": "tiny", "recompute": False, "learning_rate": 6e-4, "max_steps": 3}
    )
    decoded = decode_hyperparameters({**encoded, "raw": "not json"})
    assert decoded == {
        "model_preset": "tiny",
        "recompute": False,
        "learning_rate": 6e-4,
        "max_steps": 3,
        "raw": "not json",
    }
    argv = to_cmd_args({**decoded, "sagemaker_program": "train.py"})
    assert argv == [
        "--learning_rate",
        "0.0006",
        "--max_steps",
        "3",
        "--model_preset",
        "tiny",
        "--raw",
        "not json",
        "--recompute",
        "False",
    ]


def test_final_metrics_are_the_last_values_in_the_log():
    lines = [
        "[train] step=10 loss=5.0 ppl=148.4 lr=1.0e-03 tokens_per_sec=100.0 mfu=0.0010",
        "noise",
        "[train] step=20 loss=4.0 ppl=54.6 lr=9.0e-04 tokens_per_sec=120.0 mfu=0.0012",
        "[valid] step=20 val_loss=4.5000 val_ppl=90.02",
    ]
    metrics = {m["MetricName"]: m["Value"] for m in final_metrics(METRIC_DEFINITIONS, lines)}
    assert metrics["train:loss"] == 4.0
    assert metrics["validation:perplexity"] == 90.02
    assert metrics["train:tokens_per_second"] == 120.0
