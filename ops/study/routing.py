"""A study's routing accuracy against t, per case, paired by seed (ops/study/latent.sh).

    python -m ddm.ops.study.routing record ROUTER_FOLDER SEED OUT.json   # one router's held-out curve
    python -m ddm.ops.study.routing table docs/study/latent --cases pixels learned

`record` keeps what `ddm train router` measured on held-out data (its meta.json's accuracy_by_t: the
share of held-out x_t whose cluster the router picks, per band of t, with the label and without);
`table` prints, per case, the mean over seeds with its 95% t-interval at a few bands of t, and the
paired difference case - baseline (the first of --cases).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ddm.ops.study.intervals import paired_differences
from ddm.ops.study.objectives import cell
from ddm.schema.atomic import write_json_atomic
from ddm.schema.checkpoint_meta import read_meta
from ddm.schema.errors import ConfigError, expected

CURVE = "with label y"  # the curve the table shows (the router also reads the label at sampling)
BANDS = (0, 2, 4, 6, 9)  # indexes of t_mid (0.05, 0.25, 0.45, 0.65, 0.95) shown


def record(router: Path, seed: int, out: Path) -> Path:
    meta = read_meta(router, kind="router")
    return write_json_atomic(
        out, {"seed": seed, "router": str(router), "accuracy_by_t": meta["accuracy_by_t"]}
    )


def read_curves(root: Path) -> dict[str, dict[int, dict]]:
    """case -> seed -> {"accuracy", "t_mid", ...} of CURVE, from seed<S>/router_<case>.json."""
    curves: dict[str, dict[int, dict]] = {}
    for path in sorted(root.glob("seed*/router_*.json")):
        rec = json.loads(path.read_text())
        curves.setdefault(path.stem.removeprefix("router_"), {})[int(rec["seed"])] = rec["accuracy_by_t"][
            CURVE
        ]
    if not curves:
        raise ConfigError(expected(f"seed<S>/router_<case>.json under {root} (ops/study/latent.sh)", "none"))
    return curves


def table(curves: dict[str, dict[int, dict]], cases: tuple[str, ...]) -> str:
    base = curves.get(cases[0], {})
    any_curve = next(iter(next(iter(curves.values())).values()))
    bands = [f"t~{any_curve['t_mid'][i]:.2f}" for i in BANDS]
    lines = ["| case | seeds | " + " | ".join(bands) + " |", "|" + "---|" * (len(bands) + 2)]
    for case in cases:
        seeds = curves.get(case, {})
        cells = [case, ",".join(map(str, sorted(seeds))) or "-"]
        cells += [cell([c["accuracy"][i] for c in seeds.values()], 3) for i in BANDS]
        lines.append("| " + " | ".join(cells) + " |")
        if case != cases[0]:
            diffs = []
            for i in BANDS:
                d = paired_differences(
                    {s: c["accuracy"][i] for s, c in seeds.items()},
                    {s: c["accuracy"][i] for s, c in base.items()},
                )
                diffs.append(cell(list(d.values()), 3, "+"))
            lines.append(f"| {case} - {cases[0]} (paired) | | " + " | ".join(diffs) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record", help="keep one router's held-out accuracy by t")
    r.add_argument("router", type=Path)
    r.add_argument("seed", type=int)
    r.add_argument("out", type=Path)
    t = sub.add_parser("table", help="the table across seeds")
    t.add_argument("records", type=Path)
    t.add_argument("--cases", nargs="+", required=True, help="the baseline, then the others")
    args = p.parse_args(argv)
    if args.what == "record":
        print(record(args.router, args.seed, args.out))
        return 0
    print(table(read_curves(args.records), tuple(args.cases)))
    print(f"\nheld-out routing accuracy ({CURVE}), mean ± half-width of the 95% t-interval across seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
