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
