"""A busy expert's slices are sized from the heartbeat allowance and the time a row takes (issue 36)."""

import pytest

from ddm.workers.slices import SliceSizer


def test_slices_use_at_most_half_the_heartbeat_allowance():
    sizer = SliceSizer((1, 2, 4, 8, 16, 32, 64), allowance_s=8.0)
    assert sizer.rows == 64, "nothing measured yet: the largest bucket"
    sizer.observe(64, 16.0)  # 0.25 s a row: 4 s of budget hold 16 rows
    assert sizer.rows == 16
    sizer.observe(4, 0.1)  # faster now; the estimate comes down slowly, never below 0.9x at once
    assert sizer.s_per_row == pytest.approx(0.225) and sizer.rows == 16
    for _ in range(40):
        sizer.observe(16, 0.16)
    assert sizer.rows == 64


def test_a_device_too_slow_for_any_slice_gets_the_smallest():
    sizer = SliceSizer((4, 8), allowance_s=1.0)
    sizer.observe(4, 40.0)
    assert sizer.rows == 4


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="slice sizes >= 1"):
        SliceSizer((0, 4), allowance_s=1.0)
