import pytest

from contract.balance import balanced_runs


def test_runs_minimise_the_heaviest_then_even_out_then_lighten_the_last():
    assert balanced_runs([5, 1, 1, 1, 1, 1], 2) == [range(0, 1), range(1, 6)]  # 5 | 5
    # The heaviest run is 3 whatever happens; the other 6 ones split 3 | 3, not 4 | 2 or 5 | 1.
    assert balanced_runs([3, 1, 1, 1, 1, 1, 1], 3) == [range(0, 1), range(1, 4), range(4, 7)]
    assert balanced_runs([1, 1, 1, 1, 1], 2) == [range(0, 3), range(3, 5)]  # 3 | 2: the later run lighter
    assert balanced_runs([1, 1, 1], 3) == [range(0, 1), range(1, 2), range(2, 3)]
    with pytest.raises(ValueError, match="cannot split 2 blocks into 3 non-empty stages"):
        balanced_runs([1, 1], 3)
