"""Tiny real checkpoints for device tests: a random torch expert and its copy with one tensor changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddm.ops.random_experts import make_random_expert
from ddm.schema.checkpoint_meta import file_sha256, read_meta, write_meta
from ddm.schema.expert_card import stamp_card
from ddm.workers.frameworks import TORCH
from ddm.workers.torch_expert.checkpoint import load_weights, save_weights


def perturbed_copy(src: Path, dst: Path) -> Path:
    """A second checkpoint: `src` with one tensor changed (the output convolution's weights doubled)."""
    shutil.copytree(src, dst)
    weights = load_weights(dst)
    weights["out_conv.weight"] = weights["out_conv.weight"] * 2.0
    save_weights(dst, weights)
    # new weights, so a new digest on the card (load_expert refuses weights that are not the card's)
    write_meta(dst, stamp_card(read_meta(dst), file_sha256(dst / TORCH.weights_file)))
    return dst


def good_and_perturbed(root: Path) -> tuple[Path, Path]:
    """(a tiny random torch expert, the same with one tensor perturbed), under root."""
    good = make_random_expert(root / "good", "torch", range(10), seed=0)
    return good, perturbed_copy(good, root / "perturbed")
