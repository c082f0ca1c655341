import importlib.util
from pathlib import Path

import pytest

from infra.estimate.stages import stage_layers, stage_parameters
from infra.training_code import model_presets, trained_presets

PARTITION = Path(__file__).parents[2] / "training" / "gpt" / "pipeline" / "partition.py"


def training_partition():
    """training/gpt/pipeline/partition.py, loaded by path (standard library only, like this module)."""
    spec = importlib.util.spec_from_file_location("training_partition", PARTITION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("preset", sorted(trained_presets()))  # the gpt rows: training pipelines GPT only
def test_the_estimate_splits_the_model_as_training_does(preset):
    partition, shape = training_partition(), model_presets()[preset]
    for vocab, length in ((50_257, 2048), (384, 16), (8_192, 1024)):
        for stages in (1, 2, 3, 4, 8):
            if stages > shape.n_layer:
                continue
            args = (shape.n_layer, shape.d_model, vocab, length, stages)
            assert stage_layers(shape, vocab, length, stages) == [len(r) for r in partition.stage_blocks(*args)]
            assert stage_parameters(shape, vocab, length, stages) == partition.stage_parameters(*args)


def test_stage_parameters_add_up_to_the_model():
    shape = model_presets()["gpt3-1.3b"]
    counts = stage_parameters(shape, 50_257, 2048, 4)
    assert stage_layers(shape, 50_257, 2048, 4) == [4, 7, 7, 6]
    assert sum(counts) == shape.parameters(50_257, 2048)
    assert [round(c / 1e6, 1) for c in counts] == [308.6, 352.5, 352.5, 302.2]


def test_the_cost_of_a_run_stopped_unfinished_is_in_cents_when_small():
    from infra.estimate.runtime import dollars

    # the local run's 2 x ml.m5.xlarge for its 1 h: the "$0 on demand"
    assert [dollars(x) for x in (2 * 0.23, 9.999, 99.5, 100, 27_390.4)] == [
        "$0.46",
        "$10.00",
        "$99.50",
        "$100",
        "$27,390",
    ]
