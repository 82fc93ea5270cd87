"""The emoji objectives study's table: velocity-only experts against mixed objectives (ops/study/emoji.sh).

    python -m ddm.ops.study.objectives docs/study/emoji

Reads seed<S>/<case>_<strategy>.json (`ddm eval` metrics, copied by emoji.sh) and prints a markdown
table: per case and strategy, class accuracy and FD as the mean over seeds with its 95% t-interval
(ops/study/intervals.py), and the paired difference mixed - velocity per seed (same seed, same
clusters, same sampling noise), which removes the seed-to-seed spread the two cases share.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ddm.ops.study.intervals import paired_differences, t_interval
from ddm.schema.errors import ConfigError, expected

CASES = ("velocity", "mixed")
STRATEGIES = (("top1", "top-1"), ("topk2", "top-2"))
METRICS = (("accuracy", "class accuracy", 3), ("fd", "FD", 1))


def read_rows(root: Path) -> dict[str, dict[int, dict]]:
    """row (case_strategy) -> seed -> metrics, for every seed<S>/ folder under root."""
    rows: dict[str, dict[int, dict]] = {}
    for folder in sorted(root.glob("seed*")):
        for path in sorted(folder.glob("*.json")):
            metrics = json.loads(path.read_text())
            rows.setdefault(path.stem, {})[int(metrics["seed"])] = metrics
    if not rows:
        wanted = f"seed<S>/<case>_<strategy>.json under {root} (ops/study/emoji.sh)"
        raise ConfigError(expected(wanted, "none"))
    return rows


def cell(values: list[float], digits: int, sign: str = "") -> str:
    if not values:
        return "not run"
    interval = t_interval(values)
    text = f"{interval.mean:{sign}.{digits}f}"
    return text if interval.half is None else f"{text} ± {interval.half:.{digits}f}"


def table(rows: dict[str, dict[int, dict]]) -> str:
    head = ["strategy", "case", "seeds", *(name for _, name, _ in METRICS)]
    head += [f"{name}: mixed - velocity (paired)" for _, name, _ in METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for strategy, title in STRATEGIES:
        for case in CASES:
            seeds = rows.get(f"{case}_{strategy}", {})
            cells = [title, case, ",".join(map(str, sorted(seeds))) or "-"]
            cells += [cell([m[key] for m in seeds.values()], digits) for key, _, digits in METRICS]
            if case == "mixed":
                base = rows.get(f"velocity_{strategy}", {})
                for key, _, digits in METRICS:
                    diff = paired_differences(
                        {s: m[key] for s, m in seeds.items()}, {s: m[key] for s, m in base.items()}
                    )
                    cells.append(cell(list(diff.values()), digits, "+"))
            else:
                cells += [""] * len(METRICS)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", type=Path, help="the study's records, e.g. docs/study/emoji")
    args = p.parse_args(argv)
    print(table(read_rows(args.records)))
    print("\nmean ± half-width of the 95% t-interval across training seeds (one seed: no interval)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
