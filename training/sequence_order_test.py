import numpy as np
from sequence_order import SequenceOrder

SIZES = [100, 50, 130, 7]  # 287 records in files of different lengths, short last blocks


def pairs(order, positions):
    files, records = order.locate(positions)
    return list(zip(files.tolist(), records.tolist(), strict=True))


def test_every_epoch_is_a_permutation_of_every_record_and_epochs_differ():
    order = SequenceOrder(SIZES, seed=3, window=32, block_records=16)
    every = sorted((f, r) for f, n in enumerate(SIZES) for r in range(n))
    epochs = [pairs(order, np.arange(e * 287, (e + 1) * 287)) for e in range(3)]
    assert all(sorted(epoch) == every for epoch in epochs)
    assert len({tuple(epoch) for epoch in epochs}) == 3  # each differs from both others (epoch 2 from 0 too)
    assert epochs[0] != pairs(SequenceOrder(SIZES, seed=4, window=32, block_records=16), np.arange(287))


def test_any_position_is_found_directly_as_a_run_from_the_start_would_reach_it():
    order = SequenceOrder(SIZES, seed=3, window=32, block_records=16)
    from_start = pairs(order, np.arange(0, 1000))
    rng = np.random.default_rng(0)
    for start in rng.integers(0, 990, 20):  # across windows and epochs, in a fresh object each time
        assert (
            pairs(SequenceOrder(SIZES, seed=3, window=32, block_records=16), np.arange(start, start + 10))
            == (from_start[start : start + 10])
        )


def test_blocks_spread_neighbours_over_files_and_in_order_reads_files_one_after_another():
    shuffled = pairs(SequenceOrder(SIZES, seed=3, window=32, block_records=16), np.arange(32))
    assert len({f for f, _ in shuffled}) > 1  # one window mixes several files
    in_order = pairs(SequenceOrder(SIZES, seed=3, window=32, shuffle=False), np.arange(287 + 3))
    assert in_order == [(f, r) for f, n in enumerate(SIZES) for r in range(n)] + [(0, 0), (0, 1), (0, 2)]
