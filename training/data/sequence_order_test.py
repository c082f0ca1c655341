import numpy as np
import pytest

from data.sequence_order import PermutedOrder, SequenceOrder

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


def test_the_permutation_is_a_bijection_of_every_epoch_seeded_and_found_directly():
    order = PermutedOrder(SIZES, seed=3)
    every = sorted((f, r) for f, n in enumerate(SIZES) for r in range(n))
    epochs = [pairs(order, np.arange(e * 287, (e + 1) * 287)) for e in range(3)]
    assert all(sorted(epoch) == every for epoch in epochs)
    assert epochs[0] != epochs[1] != epochs[2] and epochs[0] != pairs(PermutedOrder(SIZES, seed=4), np.arange(287))
    from_start = [pair for epoch in epochs for pair in epoch]
    for start in np.random.default_rng(0).integers(0, 850, 20):  # across epochs, in a fresh object each time
        assert pairs(PermutedOrder(SIZES, seed=3), np.arange(start, start + 10)) == from_start[start : start + 10]
    for records in (1, 2, 3, 5, 4097):  # 4,097 needs 14 bits: 3 of every 4 Feistel outputs are walked past
        assert sorted(PermutedOrder([records], seed=1).permute(0, np.arange(records)).tolist()) == list(range(records))


def test_the_permutation_spreads_neighbours_over_the_epoch_as_a_random_one_does():
    positions = PermutedOrder([10_000], seed=5).permute(0, np.arange(10_000))
    jumps = np.abs(np.diff(positions))
    assert 3_000 < jumps.mean() < 3_700  # a uniformly random permutation: N / 3
    assert np.mean(jumps < 64) < 0.02  # neighbours within a 64-record block: 1.3% at random (blocks: most)
    blocks = pairs(SequenceOrder([10_000], seed=5, window=1024), np.arange(10_000))
    assert np.mean(np.abs(np.diff([r for _, r in blocks])) < 64) > 0.05


def test_a_network_that_is_no_bijection_fails_after_the_bounded_walk_instead_of_spinning(monkeypatch):
    order = PermutedOrder(SIZES, seed=3)  # 287 records: 10 bits, 1,024 values, at most 737 passes after the first
    passes = []

    def outside_for_ever(values, keys):  # every value maps to one outside [0, 287): the walk never comes back
        passes.append(len(values))
        return np.full_like(values, 1000)

    monkeypatch.setattr(order, "_feistel", outside_for_ever)
    with pytest.raises(RuntimeError, match=r"left \[0, 287\) for over 737 passes, .* not a permutation"):
        order.permute(0, np.arange(10))
    assert len(passes) == 1 + order.max_walk == 738
