"""The interval math of the study tables against hand computations and the t distribution itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddm.ops.study.intervals import T_975, below_zero, mean_sd, paired_differences, t_975, t_interval
from ddm.schema.errors import ConfigError


def t_cdf_above_zero(q: float, df: int) -> float:
    """P(0 < T < q) for Student's t with df degrees of freedom, by the trapezoid rule on its density."""
    x = np.linspace(0.0, q, 200_001)
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    return float(np.trapezoid(c * (1 + x**2 / df) ** (-(df + 1) / 2), x))


@pytest.mark.parametrize("df", sorted(T_975))
def test_hard_coded_t_quantiles_leave_2_5_percent_above(df):
    assert t_cdf_above_zero(T_975[df], df) == pytest.approx(0.475, abs=2e-5)


def test_t_interval_matches_a_hand_computation():
    iv = t_interval([1.0, 2.0, 3.0, 4.0])  # mean 2.5, sd sqrt(5/3) = 1.29099, t_{0.975,3} = 3.182
    assert iv.n == 4 and iv.mean == 2.5
    assert iv.half == pytest.approx(3.182 * 1.290994 / 2, rel=1e-6)
    assert (iv.lo, iv.hi) == pytest.approx((2.5 - 2.05397, 2.5 + 2.05397), abs=1e-5)


def test_one_value_has_no_interval_across_seeds():
    iv = t_interval([41.3])
    assert (iv.mean, iv.half, iv.lo, iv.hi, iv.n) == (41.3, None, None, None, 1)
    assert mean_sd([0.5]) == (0.5, None)


def test_beyond_ten_seeds_or_no_value_fails_clearly():
    with pytest.raises(ConfigError, match="hard-coded t quantiles"):
        t_interval(range(11))
    with pytest.raises(ConfigError, match="t quantiles"):
        t_975(0)
    with pytest.raises(ConfigError, match="at least one finite value"):
        t_interval([])
    with pytest.raises(ConfigError, match="finite"):
        t_interval([1.0, float("nan")])


def test_paired_differences_keep_only_seeds_in_both_and_count_signs():
    d = paired_differences({0: 38.0, 1: 43.0, 2: 41.0, 5: 1.0}, {0: 40.0, 1: 42.0, 2: 44.0, 3: 9.0})
    assert d == {0: -2.0, 1: 1.0, 2: -3.0}
    assert below_zero(d.values()) == 2
