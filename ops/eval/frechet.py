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


def frechet_bootstrap(
    a: np.ndarray, b: np.ndarray, resamples: int = 200, seed: int = 0, keep_draws: bool = False
) -> dict:
    """How much FD(a, b) moves when both feature sets are redrawn: a bootstrap over rows of a and b.

    Returns the bootstrap standard error and FD +- 1.96 se as a 95% interval (and, with keep_draws, the
    resampled FDs as "fd_draws": for one seed and the same sizes the rows drawn are the same, so two
    generated sets of paired images give paired draws; ddm.ops.eval.sweep compares them). Not a percentile
    interval: a resample repeats rows, which pushes every resampled FD up (FD's small-sample bias, the
    same for every row of one n), so the draws' spread is kept and their shifted location is not.
    """
    return FrechetBootstrap(b, len(a), resamples, seed).score(a, keep_draws)


class FrechetBootstrap:
    """frechet_bootstrap against one fixed set b, for many sets a of one size n: b's side of every
    redraw (its rows, mean, trace and covariance square root) is computed once, so scoring a set costs
    one covariance of n rows and one D x D eigenproblem a redraw (a sweep scores ~100 sets against one
    real set). The rows redrawn are the same, in the same order, for every a of size n."""

    def __init__(self, b: np.ndarray, n: int, resamples: int = 200, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.n = n
        self.rows: list[np.ndarray] = []
        self.redrawn: list[tuple[np.ndarray, float, np.ndarray]] = []
        for _ in range(resamples):
            self.rows.append(rng.integers(0, n, n))
            self.redrawn.append(_moments(b[rng.integers(0, len(b), len(b))]))
        self.full = _moments(b)

    def score(self, a: np.ndarray, keep_draws: bool = False) -> dict:
        if len(a) != self.n:
            raise ValueError(f"FrechetBootstrap for {self.n} rows, given {len(a)}")
        fd = _distance(a, self.full)
        draws = [_distance(a[rows], b) for rows, b in zip(self.rows, self.redrawn, strict=True)]
        se = float(np.std(draws, ddof=1))
        out = {"fd_se": se, "fd_ci95": [max(0.0, fd - 1.96 * se), fd + 1.96 * se]}  # FD >= 0
        if keep_draws:
            out["fd_draws"] = [float(d) for d in draws]
        return out


def _moments(b: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """(mean, trace of the covariance, its symmetric square root) of feature set b [M, D]."""
    s_b = np.cov(b, rowvar=False)
    w, v = np.linalg.eigh(s_b)
    return b.mean(0), float(np.trace(s_b)), (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def _distance(a: np.ndarray, b: tuple[np.ndarray, float, np.ndarray]) -> float:
    """frechet_distance(a, B) from B's _moments: Tr (S_b^1/2 S_a S_b^1/2)^1/2 has the same eigenvalues."""
    mu_b, trace_b, root_b = b
    s_a = np.cov(a, rowvar=False)
    cross = np.linalg.eigvalsh(root_b @ s_a @ root_b)
    return float(
        ((a.mean(0) - mu_b) ** 2).sum() + np.trace(s_a) + trace_b - 2 * np.sqrt(np.clip(cross, 0, None)).sum()
    )
