"""A text deployment's images for chosen prompts, one tile each with its prompt written under it (README's
and docs/RESULTS.md's grid of the shipped text deployment). Each prompt is one job of one image, sampled
in-process as `ddm sample` does, its prompt encoded by the real encoder.

    python -m ddm.ops.study.prompt_grid --deployment checkpoints/emoji-text/deployment.toml \\
        --out docs/img/emoji-text-grid.png "red heart" "blue heart" ...
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

TILE = 96  # pixels per image side (32 x 3)
CAPTION = 28  # pixels under each tile for its prompt


def draw_grid(pictures: np.ndarray, prompts: list[str], cols: int, value_range) -> Image.Image:
    """Tiles of pictures f32 [n, 3, H, W] in value_range, each with its prompt under it."""
    from PIL import Image, ImageDraw

    lo, hi = value_range
    rows = -(-len(prompts) // cols)
    grid = Image.new("RGB", (cols * TILE, rows * (TILE + CAPTION)), (255, 255, 255))
    draw = ImageDraw.Draw(grid)
    for i, (x, prompt) in enumerate(zip(pictures, prompts, strict=True)):
        rgb = ((np.clip(x, lo, hi) - lo) / (hi - lo) * 255).round().astype(np.uint8).transpose(1, 2, 0)
        tile = Image.fromarray(rgb).resize((TILE, TILE), Image.NEAREST)
        left, top = (i % cols) * TILE, (i // cols) * (TILE + CAPTION)
        grid.paste(tile, (left, top))
        text = prompt if len(prompt) <= 15 else prompt[:14] + "…"
        draw.text((left + 4, top + TILE + 7), text, fill=(30, 30, 30))
    return grid


def main(argv: list[str] | None = None) -> int:
    from ddm.ops.eval.text_eval import sample_prompts
    from ddm.router.deployment_loader import load_decoder
    from ddm.schema.deployment import Deployment
    from ddm.workers.text_encoder import load_deployment_encoder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deployment", type=Path, required=True)
    p.add_argument("--strategy", default="top1")
    p.add_argument("--guidance", type=float, default=3.0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cols", type=int, default=8)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("prompts", nargs="+")
    args = p.parse_args(argv)
    deployment = Deployment.load(args.deployment)
    encoder = load_deployment_encoder(deployment.conditioning.text, deployment.text_encoder)
    pictures, _ = sample_prompts(
        args.deployment, args.prompts, args.strategy, args.steps, args.guidance, args.seed, encoder
    )
    decoder = load_decoder(deployment)  # a latent deployment's pictures are its decoder's pixels
    value_range = (decoder.card.pixel_space if decoder else deployment.sample_space).value_range
    args.out.parent.mkdir(parents=True, exist_ok=True)
    draw_grid(pictures, args.prompts, args.cols, value_range).save(args.out)
    print(f"{args.out}: {len(args.prompts)} prompts, {args.strategy}, g={args.guidance}, {args.steps} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
