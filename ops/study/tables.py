"""Tables and the sample figure of the DDM-vs-monolith study (ops/study/study.sh) from its eval folders.

    python -m ddm.ops.study.tables runs/study [--steps 2000 --preset tiny --batch 64]

Prints Markdown (the tables of docs/RESULTS.md) and writes <study>/study_samples.png: one row of
samples per case and strategy, so the strategies can be compared by eye.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ddm.schema.checkpoint_meta import META_FILE, read_meta

CASES = [  # (case, what, monolith case, strategies in table order)
    ("mnist_mono", "MNIST monolith", None, ["top1"]),
    ("mnist_labels", "MNIST label split K=2", "mnist_mono", ["oracle", "top1", "full"]),
    ("fashion_mono", "Fashion-MNIST monolith", None, ["top1"]),
    ("fashion_kmeans2", "Fashion-MNIST k-means K=2", "fashion_mono", ["top1", "full"]),
    ("fashion_kmeans4", "Fashion-MNIST k-means K=4", "fashion_mono", ["top1", "topk2", "full"]),
    ("fashion_random2", "Fashion-MNIST random shards K=2", "fashion_mono", ["top1", "full"]),
]
STRATEGY_NAMES = {"top1": "top1", "topk2": "top2", "full": "full", "oracle": "oracle"}


def load(study: Path, case: str, strategy: str) -> dict | None:
    path = study / "eval" / f"{case}_{strategy}" / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else None


def router_accuracy(study: Path, case: str) -> str:
    """The learned router's worst held-out accuracy over the t bins >= 0.5, without and with the label."""
    folder = study / case / "router"
    if not (folder / META_FILE).is_file():
        return "-"
    by_t = read_meta(folder, kind="router")["accuracy_by_t"]
    cells = []
    for key in ("unconditional (y = null)", "with label y"):
        t = np.asarray(by_t[key]["t_mid"], dtype=float)
        cells.append(f"{np.asarray(by_t[key]['accuracy'], dtype=float)[t >= 0.5].min():.2f}")
    return " / ".join(cells)


def table(study: Path) -> str:
    lines = [
        "| case | strategy | class accuracy | FD (real vs real) | forward passes / image | s / image | "
        "router accuracy, worst t >= 0.5 (no label / label) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for case, what, _, strategies in CASES:
        for strategy in strategies:
            m = load(study, case, strategy)
            if m is None:
                lines.append(f"| {what} | {STRATEGY_NAMES[strategy]} | not run | | | | |")
                continue
            monolith = case.endswith("_mono")
            lines.append(
                f"| {what} | {'-' if monolith else STRATEGY_NAMES[strategy]} | {m['accuracy']:.3f} | "
                f"{m['fd']:.1f} ({m['fd_real_vs_real']:.1f}) | {m['forward_passes_per_image']:.0f} | "
                f"{m['seconds_per_image']:.3f} | {'-' if monolith else router_accuracy(study, case)} |"
            )
    return "\n".join(lines)


def training_table(study: Path) -> str:
    lines = [
        "| case | expert | samples in cluster | batch | final loss | wall (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case, what, _, _ in CASES:
        for meta_path in sorted((study / case).glob(f"expert*/{META_FILE}")):
            meta = read_meta(meta_path.parent, kind="expert")
            lines.append(
                f"| {what} | {meta['expert']} | {sum(meta['label_counts'])} | {meta['batch']} | "
                f"{meta.get('final_loss', float('nan')):.4f} | {meta.get('wall_time_s', float('nan')):.0f} |"
            )
    return "\n".join(lines)


def figure(study: Path, out: Path) -> None:
    """One row per (case, strategy): the first 10 samples of its grid (labels 0..9)."""
    from PIL import Image

    rows, names = [], []
    for case, what, _, strategies in CASES:
        for strategy in strategies:
            grid = study / "eval" / f"{case}_{strategy}" / "samples.png"
            if grid.is_file():
                img = np.asarray(Image.open(grid).convert("L"))
                rows.append(img[: img.shape[1] // 10])  # the first row: labels 0..9
                names.append(f"{what}, {STRATEGY_NAMES[strategy]}")
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 1, figsize=(6, 0.75 * len(rows)), dpi=120)
    for ax, img, name in zip(np.atleast_1d(axes), rows, names, strict=True):
        ax.imshow(img, cmap="gray")
        ax.set_axis_off()
        ax.set_title(name, fontsize=7, loc="left", pad=2)
    fig.tight_layout(h_pad=0.3)
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", type=Path)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--preset", default=None)
    p.add_argument("--batch", type=int, default=None)
    args = p.parse_args(argv)
    print(f"study {args.study}: preset {args.preset}, {args.steps} steps, monolith batch {args.batch}\n")
    print(training_table(args.study))
    print()
    print(table(args.study))
    out = args.study / "study_samples.png"
    figure(args.study, out)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
