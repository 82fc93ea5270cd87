"""The Frechet distance between two feature sets (FD): the FID formula on the evaluation classifier's
features, numpy only."""

from __future__ import annotations

import numpy as np


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Frechet distance between Gaussians fitted to feature sets a [N, D] and b [M, D].

    |mu_a - mu_b|^2 + Tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2), with symmetric square roots by
    eigendecomposition (numerically kinder than a general sqrtm, and numpy only).
    """
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    w, v = np.linalg.eigh(s_a)
    root_a = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    cross = np.linalg.eigvalsh(root_a @ s_b @ root_a)
    return float(
        ((mu_a - mu_b) ** 2).sum()
        + np.trace(s_a)
        + np.trace(s_b)
        - 2 * np.sqrt(np.clip(cross, 0, None)).sum()
    )


def frechet_bootstrap(a: np.ndarray, b: np.ndarray, resamples: int = 200, seed: int = 0) -> dict:
    """How much FD(a, b) moves when both feature sets are redrawn: a bootstrap over rows of a and b.

    Returns the bootstrap standard error and FD +- 1.96 se as a 95% interval. Not a percentile
    interval: a resample repeats rows, which pushes every resampled FD up (FD's small-sample bias, the
    same for every row of one n), so the draws' spread is kept and their shifted location is not.
    """
    rng = np.random.default_rng(seed)
    fd = frechet_distance(a, b)
    draws = [
        frechet_distance(a[rng.integers(0, len(a), len(a))], b[rng.integers(0, len(b), len(b))])
        for _ in range(resamples)
    ]
    se = float(np.std(draws, ddof=1))
    return {"fd_se": se, "fd_ci95": [max(0.0, fd - 1.96 * se), fd + 1.96 * se]}  # FD >= 0
