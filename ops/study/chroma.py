"""Where do the emoji deployments' faded colours come from? The mean chroma (max - min of R, G, B) of the
foreground pixels of PNG grids drawn the same way (ddm.client.images.save_grid, background grey and grid
borders left out): real held-out emoji, their autoencoder reconstructions, and the given sample grids.

    python -m ddm.ops.study.chroma --autoencoder checkpoints/emoji-latent/decoder \\
        checkpoints/emoji-latent/samples_top1.png docs/study/emoji-pixel/samples_top1.png
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np


def png_chroma(path: Path) -> float:
    """Mean chroma of a grid PNG's foreground: not the mid-grey background (a sample's 0), not the
    dark borders between tiles."""
    from PIL import Image

    rgb = np.asarray(Image.open(path).convert("RGB"), np.float32) / 255
    chroma = rgb.max(2) - rgb.min(2)
    foreground = (np.abs(rgb - 0.5).max(2) >= 0.04) & (rgb.max(2) >= 0.25)
    return float(chroma[foreground].mean())


def main(argv: list[str] | None = None) -> int:
    from ddm.client.images import save_grid
    from ddm.ops.data.dataset import load_dataset
    from ddm.workers.autoencoder.checkpoint import load_autoencoder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--autoencoder", required=True, help="the latent deployment's autoencoder folder")
    p.add_argument("--split", default="test", help="the real images (emoji, default: test)")
    p.add_argument("--count", type=int, default=72, help="real images drawn (default 72: 8 rows of 9)")
    p.add_argument("grids", nargs="*", type=Path, help="sample grid PNGs to compare")
    args = p.parse_args(argv)
    real = load_dataset("emoji", args.split).as_model_input()[: args.count]
    autoencoder = load_autoencoder(args.autoencoder)
    with tempfile.TemporaryDirectory() as tmp:
        drawn = {
            f"real emoji {args.split}": save_grid(real, Path(tmp) / "real.png", cols=9),
            "their reconstructions": save_grid(
                autoencoder.decode(autoencoder.encode(real)), Path(tmp) / "recon.png", cols=9
            ),
        }
        base = png_chroma(drawn[f"real emoji {args.split}"])
        for name, path in [*drawn.items(), *((str(g), g) for g in args.grids)]:
            value = png_chroma(path)
            print(f"{name:50s} chroma {value:.3f} ({value / base:.0%} of the real images')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
