"""A study's table of cases against a baseline, paired by seed: the emoji objectives study (velocity-only
experts against mixed objectives, ops/study/emoji.sh) and the latent study (clusters on learned
features against pixel PCA, latent DDM against pixel DDM, ops/study/latent.sh).

    python -m ddm.ops.study.objectives docs/study/emoji
    python -m ddm.ops.study.objectives docs/study/latent --cases pixels learned
    python -m ddm.ops.study.objectives docs/study/latent docs/study/emoji --cases velocity learned

Reads seed<S>/<case>_<strategy>.json (`ddm eval` metrics, copied by the study scripts) under every
records folder given and prints a markdown table: per case and strategy, class accuracy and FD as the
mean over seeds with its 95% t-interval (ops/study/intervals.py), and the paired difference case -
baseline (the first of --cases) per seed (same seed, same sampling noise), which removes the
seed-to-seed spread the two cases share.
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


def read_rows(*roots: Path) -> dict[str, dict[int, dict]]:
    """row (case_strategy) -> seed -> metrics, for every seed<S>/ folder under each root."""
    rows: dict[str, dict[int, dict]] = {}
    for root in roots:
        for folder in sorted(root.glob("seed*")):
            for path in sorted(folder.glob("*_top*.json")):
                metrics = json.loads(path.read_text())
                rows.setdefault(path.stem, {})[int(metrics["seed"])] = metrics
    if not rows:
        wanted = f"seed<S>/<case>_<strategy>.json under {', '.join(map(str, roots))} (ops/study/*.sh)"
        raise ConfigError(expected(wanted, "none"))
    return rows


def cell(values: list[float], digits: int, sign: str = "") -> str:
    if not values:
        return "not run"
    interval = t_interval(values)
    text = f"{interval.mean:{sign}.{digits}f}"
    return text if interval.half is None else f"{text} ± {interval.half:.{digits}f}"


def table(rows: dict[str, dict[int, dict]], cases: tuple[str, ...] = CASES) -> str:
    base_case = cases[0]
    head = ["strategy", "case", "seeds", *(name for _, name, _ in METRICS)]
    head += [f"{name}: case - {base_case} (paired)" for _, name, _ in METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for strategy, title in STRATEGIES:
        for case in cases:
            seeds = rows.get(f"{case}_{strategy}", {})
            cells = [title, case, ",".join(map(str, sorted(seeds))) or "-"]
            cells += [cell([m[key] for m in seeds.values()], digits) for key, _, digits in METRICS]
            if case != base_case:
                base = rows.get(f"{base_case}_{strategy}", {})
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
    p.add_argument("records", type=Path, nargs="+", help="the study's records, e.g. docs/study/emoji")
    p.add_argument(
        "--cases",
        nargs="+",
        default=list(CASES),
        help=f"the baseline, then the others (default: {' '.join(CASES)})",
    )
    args = p.parse_args(argv)
    print(table(read_rows(*args.records), tuple(args.cases)))
    print("\nmean ± half-width of the 95% t-interval across training seeds (one seed: no interval)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
