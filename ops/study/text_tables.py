"""docs/RESULTS.md's tables of the shipped text deployment, from the records ops/eval/text_eval.py wrote
(checkpoints/emoji-text/eval/*.json): per split and strategy, and the guidance sweep. Given several
folders (a study's cases, e.g. ops/study/text_study.sh's), one table with a first column naming each
case by its folder's parent.

    python -m ddm.ops.study.text_tables checkpoints/emoji-text/eval
    python -m ddm.ops.study.text_tables runs/text-clusters/pixels/eval runs/text-clusters/captions/eval
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def row(r: dict) -> str:
    lo, hi = r["r_precision_ci95"]
    glo, ghi = r["group_accuracy_ci95"]
    share = r["r_precision"] / r["r_precision_ceiling"]
    return (
        f"| {r['split']} | {r['strategy']} | {r['guidance']:g} | "
        f"{r['r_precision']:.3f} [{lo:.3f}, {hi:.3f}] | "
        f"{r['r_precision_ceiling']:.3f} ({share:.0%}) | {r['group_accuracy']:.3f} [{glo:.3f}, {ghi:.3f}] | "
        f"{r['fd']:.1f} | {r['fd_real_vs_real']:.1f} | {r['seconds_per_image']:.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    folders = [Path(f) for f in (argv or sys.argv[1:])]
    cases = len(folders) > 1
    head = "| prompts | strategy | guidance | R-precision [95%] | its ceiling (share) | group accuracy [95%] "
    print(("| case " if cases else "") + head + "| FD | FD real vs real | s / image |")
    print("|---" * (9 + cases) + "|")
    order = {"top1": 0, "topk:2": 1, "full": 2}
    for folder in folders:
        records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
        for r in sorted(
            records,
            key=lambda r: (r["split"] != "train", r["guidance"] != 3.0, order[r["strategy"]], r["guidance"]),
        ):
            print((f"| {folder.parent.name} " if cases else "") + row(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
