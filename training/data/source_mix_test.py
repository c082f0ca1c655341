import numpy as np
import pytest

from data.sequence_order import PermutedOrder, SequenceOrder
from data.source_mix import PERIOD, MixedOrder, mix_plan, slot_counts, window_bound

WINDOW = 1_000


def mix(weights, sizes=None, seed=3) -> MixedOrder:
    """One file per source (file i is source i); records 40 each unless ``sizes`` says."""
    sizes = sizes or [40] * len(weights)
    return MixedOrder([PermutedOrder([n], seed=seed) for n in sizes], [[i] for i in range(len(sizes))], weights)


def source_counts(sources: np.ndarray, count: int) -> np.ndarray:
    """[positions + 1, sources]: each source's sequences among the first n, n = 0 .. len(sources)."""
    return np.concatenate([np.zeros((1, count), np.int64), np.cumsum(np.eye(count, dtype=np.int64)[sources], 0)])


@pytest.mark.parametrize("weights", [[0.7, 0.3], [3.0, 1.0], [0.6, 0.3, 0.1], [0.999, 0.001], [1, 1, 1, 1, 1, 0.02]])
def test_every_window_of_1000_and_the_whole_run_hold_each_source_within_the_stated_bound(weights):
    order = mix(weights)
    shares = np.asarray(weights) / sum(weights)
    run = 2 * PERIOD + 12_345  # across period boundaries, ending mid-period
    sources, indices = order.source_index(np.arange(run))
    for s in range(len(weights)):  # each source's own stream read in order, none skipped, none twice
        np.testing.assert_array_equal(indices[sources == s], np.arange(np.sum(sources == s)))
    counts = source_counts(sources, len(weights))
    windows = counts[WINDOW:] - counts[:-WINDOW]  # every window of 1,000 consecutive sequences
    bounds = np.array([window_bound(w, len(weights), WINDOW) for w in shares])
    assert np.all(np.abs(windows - WINDOW * shares) <= bounds)
    assert np.all(np.abs(counts[-1] - run * shares) <= np.array([window_bound(w, len(weights), run) for w in shares]))
    np.testing.assert_array_equal(order.sequences(run), counts[-1])
    assert np.abs(windows - WINDOW * shares).max() <= 1 + 1e-9  # measured: within one sequence of the share


def test_a_tiny_source_repeats_and_a_large_one_is_subsampled_each_in_its_own_epoch_order():
    order = MixedOrder(
        [PermutedOrder([7], seed=5), PermutedOrder([3_000, 2_000], seed=5)], [[2], [0, 1]], [0.5, 0.5]
    )  # the tiny source is file 2, the large one files 0 and 1
    files, records = order.locate(np.arange(2_000))
    tiny = list(zip(files[files == 2].tolist(), records[files == 2].tolist(), strict=True))
    assert len(tiny) == 1_000 and all(
        sorted(tiny[e * 7 : (e + 1) * 7]) == [(2, r) for r in range(7)] for e in range(142)
    )
    epochs = [tiny[e * 7 : (e + 1) * 7] for e in range(10)]
    assert len({tuple(epoch) for epoch in epochs}) > 1  # each epoch its own permutation
    large = set(zip(files[files != 2].tolist(), records[files != 2].tolist(), strict=True))
    assert len(large) == 1_000  # 1,000 of 5,000 records, none twice: a fifth of an epoch
    expected = PermutedOrder([3_000, 2_000], seed=5).locate(np.arange(1_000))  # the large source's own stream
    np.testing.assert_array_equal(files[files != 2], expected[0])
    np.testing.assert_array_equal(records[files != 2], expected[1])


def test_any_position_is_found_directly_and_the_stream_is_seeded():
    order = MixedOrder(
        [SequenceOrder([30, 20], seed=1, window=8, block_records=4), PermutedOrder([9], seed=1)], [[0, 1], [2]], [2, 1]
    )
    from_start = np.stack(order.locate(np.arange(3 * PERIOD)))
    for start in np.random.default_rng(0).integers(0, 3 * PERIOD - 10, 20):  # a fresh object each time: no history
        fresh = MixedOrder(
            [SequenceOrder([30, 20], seed=1, window=8, block_records=4), PermutedOrder([9], seed=1)],
            [[0, 1], [2]],
            [2, 1],
        )
        np.testing.assert_array_equal(
            np.stack(fresh.locate(np.arange(start, start + 10))), from_start[:, start : start + 10]
        )
    assert not np.array_equal(
        np.stack(mix([2, 1], seed=4).locate(np.arange(100))), np.stack(mix([2, 1]).locate(np.arange(100)))
    )


def test_slots_round_by_largest_remainder_and_a_weight_too_small_for_one_slot_is_refused():
    assert slot_counts([1, 1, 1], period=10).tolist() == [4, 3, 3]
    assert slot_counts([0.7, 0.3]).sum() == PERIOD
    with pytest.raises(ValueError, match="below 1 / 65,536"):
        slot_counts([1.0, 1e-6])


def test_the_plan_states_each_sources_share_sequences_and_epochs_over_the_run():
    plan = mix_plan(["web", "code", "web"], [600, 10, 400], {"web": 1.0, "code": 3.0}, 4_000)
    assert [name for name, *_ in plan] == ["code", "web"]
    (_, code_share, code_seqs, code_epochs), (_, web_share, web_seqs, web_epochs) = plan
    assert (code_share, web_share) == (0.75, 0.25) and (code_seqs, web_seqs) == (3_000, 1_000)
    assert (code_epochs, web_epochs) == (300.0, 1.0)  # 10 records read 300 times; 1,000 records once


@pytest.mark.parametrize("weights", [[3.0, 1.0], [0.6, 0.3, 0.1], [1, 1, 1], [0.999, 0.001]])
def test_the_layout_is_the_slots_in_order_of_their_ideal_positions_ties_by_name(weights):
    """The stream itself, not only its proportions: a run resumed on another version of the code reads the same
    sequences. The k-th of source s's c_s slots ideally at (k + 1/2) x PERIOD / c_s, compared exactly (integers)."""
    order = mix(weights)
    counts = slot_counts(weights).tolist()
    scale = int(np.lcm.reduce([2 * c for c in counts]))  # (2k + 1) / (2 c_s) x scale is a whole number
    ideal = sorted(((2 * k + 1) * (scale // (2 * c)), s, k) for s, c in enumerate(counts) for k in range(c))
    assert order.slot_source.tolist() == [s for _, s, _ in ideal]
    assert order.slot_rank.tolist() == [k for _, _, k in ideal]
    period = 5  # slot j of period q holding the k-th slot of s: sequence q x c_s + k of s's stream
    sources, indices = order.source_index(period * PERIOD + np.arange(PERIOD))
    assert sources.tolist() == [s for _, s, _ in ideal]
    assert indices.tolist() == [period * counts[s] + k for _, s, k in ideal]


def test_the_stream_of_a_three_to_one_mix_is_pinned():
    """The first slots of the docstring's example, written out: a change of layout changes them."""
    sources, indices = mix([3.0, 1.0]).source_index(np.arange(12))
    # ideal positions: source 0 at 2/3, 2, 10/3, 14/3, 6, ...; source 1 at 2, 6, 10: at 2 and 6 source 0 first
    assert sources.tolist() == [0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0]
    assert indices.tolist() == [0, 1, 0, 2, 3, 4, 1, 5, 6, 7, 2, 8]
