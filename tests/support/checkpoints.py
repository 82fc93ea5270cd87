"""Tiny real checkpoints for device tests: a random torch expert and its copy with one tensor changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddm.ops.random_experts import make_random_expert
from ddm.workers.torch_expert.checkpoint import load_weights, save_weights


def perturbed_copy(src: Path, dst: Path) -> Path:
    """A second checkpoint: `src` with one tensor changed (the output convolution's weights doubled)."""
    shutil.copytree(src, dst)
    weights = load_weights(dst)
    weights["out_conv.weight"] = weights["out_conv.weight"] * 2.0
    save_weights(dst, weights)
    return dst


def good_and_perturbed(root: Path) -> tuple[Path, Path]:
    """(a tiny random torch expert, the same with one tensor perturbed), under root."""
    good = make_random_expert(root / "good", "torch", range(10), seed=0)
    return good, perturbed_copy(good, root / "perturbed")
