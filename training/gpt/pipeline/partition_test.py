import pytest
from contract.presets import block_parameters

from gpt.pipeline.partition import stage_blocks, stage_parameters


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
