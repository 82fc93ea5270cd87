"""Tiny checkpoints in Paris's folder layout (ops/random_paris.py writes them): real tensor names, tiny
widths, random weights, CLIP's real BPE vocabulary and a tiny AutoencoderKL. The text width is the tiny
CLIP's hidden size, so every expert's text_proj reads it."""

from __future__ import annotations

from pathlib import Path

from ddm.ops.random_paris import random_state, write_random_paris
from ddm.workers.paris.config import ParisExpertConfig, ParisRouterConfig

TINY_TEXT_WIDTH = 24  # the tiny CLIP's hidden size
TINY_EXPERT = ParisExpertConfig(
    width=32, depth=2, heads=4, patch=2, channels=4, image_size=8, text_width=TINY_TEXT_WIDTH
)
TINY_ROUTER = ParisRouterConfig(width=32, depth=2, heads=4, patch=2, channels=4, image_size=8, num_experts=2)

__all__ = ["TINY_EXPERT", "TINY_ROUTER", "random_state", "write_paris_fixture"]


def write_paris_fixture(
    root: Path, expert=TINY_EXPERT, router=TINY_ROUTER, seed: int = 0, stages: bool = True
) -> Path:
    """A tiny Paris folder at `root` with router.num_experts experts; returns `root`. stages: also the
    vae/, text_encoder/ and tokenizer/ folders (the models' own checks need none of them)."""
    return write_random_paris(root, expert, router, seed, stages)
