import pytest

from gpt.pipeline.partition import balanced_runs, stage_blocks, stage_parameters
from gpt.presets import block_parameters


def test_runs_minimise_the_heaviest_then_even_out_then_lighten_the_last():
    assert balanced_runs([5, 1, 1, 1, 1, 1], 2) == [range(0, 1), range(1, 6)]  # 5 | 5
    # The heaviest run is 3 whatever happens; the other 6 ones split 3 | 3, not 4 | 2 or 5 | 1.
    assert balanced_runs([3, 1, 1, 1, 1, 1, 1], 3) == [range(0, 1), range(1, 4), range(4, 7)]
    assert balanced_runs([1, 1, 1, 1, 1], 2) == [range(0, 3), range(3, 5)]  # 3 | 2: the later run lighter
    assert balanced_runs([1, 1, 1], 3) == [range(0, 1), range(1, 2), range(2, 3)]
    with pytest.raises(ValueError, match="cannot split 2 blocks into 3 non-empty stages"):
        balanced_runs([1, 1], 3)


def test_embeddings_count_on_the_first_stage():
    # gpt3-1.3b: embeddings = 107.1 M, 2.1 blocks' worth -> the first stage takes fewer blocks.
    assert stage_blocks(24, 2048, 50_257, 2048, 4) == [range(0, 4), range(4, 11), range(11, 18), range(18, 24)]
    per_block = block_parameters(2048)
    assert per_block == 50_358_272
    counts = stage_parameters(24, 2048, 50_257, 2048, 4)
    assert counts == [4 * per_block + 52_305 * 2048, 7 * per_block, 7 * per_block, 6 * per_block + 2 * 2048]
    one_device = stage_parameters(24, 2048, 50_257, 2048, 1)[0]
    assert sum(counts) == one_device == 24 * per_block + 52_305 * 2048 + 2 * 2048
    assert max(counts) / one_device == pytest.approx(0.268, abs=1e-3)  # the ideal is 1/4


def test_every_stage_holds_a_block():
    for n_layer in range(1, 9):
        for stages in range(1, n_layer + 1):
            runs = stage_blocks(n_layer, 64, 384, 16, stages)
            assert [i for run in runs for i in run] == list(range(n_layer))
            assert all(len(run) >= 1 for run in runs)
