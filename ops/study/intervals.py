"""Intervals across training seeds for the study's tables (pure numpy; scipy is not a dependency).

A seed is one unit: the 95% interval of a mean over n seeds is mean +- t_{0.975, n-1} * sd / sqrt(n)
(sd with ddof=1). With one seed there is no interval across seeds: `Interval.half` is None and the
caller shows another, labelled interval (the bootstrap over images) instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ddm.schema.errors import ConfigError, expected

# Student's t, 0.975 quantile, by degrees of freedom (n seeds - 1); standard table values.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_975(df: int) -> float:
    """The 0.975 quantile of Student's t with df degrees of freedom, for df = 1..9 (2 to 10 seeds)."""
    if df not in T_975:
        raise ConfigError(expected(f"1 <= n seeds - 1 <= {max(T_975)} (hard-coded t quantiles)", df))
    return T_975[df]


@dataclass(frozen=True)
class Interval:
    """The mean of n values and the half-width of its 95% t-interval (None when n = 1)."""

    mean: float
    half: float | None
    n: int

    @property
    def lo(self) -> float | None:
        return None if self.half is None else self.mean - self.half

    @property
    def hi(self) -> float | None:
        return None if self.half is None else self.mean + self.half


def _values(values: Iterable[float]) -> np.ndarray:
    v = np.asarray(list(values), dtype=float)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ConfigError(expected("at least one finite value", v.tolist()))
    return v


def mean_sd(values: Iterable[float]) -> tuple[float, float | None]:
    """(mean, sample sd with ddof=1); the sd is None for a single value."""
    v = _values(values)
    return float(v.mean()), (float(v.std(ddof=1)) if v.size > 1 else None)


def t_interval(values: Iterable[float]) -> Interval:
    """Mean and 95% t-interval across seeds: mean +- t_{0.975, n-1} * sd / sqrt(n)."""
    v = _values(values)
    mean, sd = mean_sd(v)
    if sd is None:
        return Interval(mean, None, 1)
    return Interval(mean, t_975(v.size - 1) * sd / math.sqrt(v.size), int(v.size))


def paired_differences(a: Mapping[int, float], b: Mapping[int, float]) -> dict[int, float]:
    """a[s] - b[s] for every seed s in both (sorted): the pairing that removes seed-to-seed noise."""
    return {s: float(a[s]) - float(b[s]) for s in sorted(a.keys() & b.keys())}


def below_zero(values: Iterable[float]) -> int:
    """How many of the values are < 0 (for the paired table's sign count)."""
    return int(np.sum(np.asarray(list(values), dtype=float) < 0))
