"""Tables and figures of the DDM-vs-monolith study (ops/study/study.sh) from its committed records.

    python -m ddm.ops.study.tables docs/study [--steps 2000 --preset tiny --batch 64] [--out-img docs/img]

Reads docs/study/seed<S>/ (written by ddm.ops.study.records) and prints Markdown: the training table,
the main table (means with 95% t-intervals across seeds), the paired tables (FD(DDM) - FD(monolith)
of the same seed; FD(top-1) - FD(top-2 or full) of the same seed) and the compute each seed took.
Writes <out-img>/study_fd_by_strategy.png (FD and class accuracy against the routing strategy),
<out-img>/study_paired.png (FD(DDM) - FD(monolith), each seed a point) and
<out-img>/study_samples.png (one row of samples, labels 0..9, per case and strategy).
With one seed there is no interval across seeds: cells say "n=1" and the FD shows the bootstrap
interval over images (fd_ci95) instead, labelled as such.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from ddm.ops.study.intervals import below_zero, mean_sd, paired_differences, t_interval
from ddm.ops.study.records import CASES, MONOLITH, SeedRecord, read_study

NAMES = {
    "fashion_mono": "monolith",
    "fashion_kmeans2": "k-means K=2",
    "fashion_kmeans4": "k-means K=4",
    "fashion_random2": "random shards K=2",
}
X = {"top1": 0, "topk2": 1, "full": 2}  # the figure's x positions; the eval suffix topk2 is top2
MONOLITH_ROW = f"{MONOLITH}_top1"
ROUTER_KEYS = ("unconditional (y = null)", "with label y")


def strategy_name(k: int, strategy: str) -> str:
    return {"top1": "top1", "topk2": "top2", "full": "full (= top2)" if k == 2 else "full"}[strategy]


def fmt(value, digits: int, sign: str = "") -> str:
    """A number, or "-" when there is none (never "nan")."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:{sign}.{digits}f}"


def md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def by_seed(study: list[SeedRecord], row: str) -> dict[int, dict]:
    return {r.seed: r.evals[row] for r in study if row in r.evals}


def mean_of(rows: dict[int, dict], key: str) -> float | None:
    values = [m[key] for m in rows.values() if m.get(key) is not None]
    return float(np.mean(values)) if values else None


def seeds_cell(seeds, study: list[SeedRecord]) -> str:
    seeds = sorted(seeds)
    everyone = [r.seed for r in study]
    return str(len(seeds)) if seeds == everyone else f"{len(seeds)} (seed {', '.join(map(str, seeds))})"


def spread(values: list[float], single: list | None = None) -> tuple[float, float | None, float | None, str]:
    """(mean, lo, hi, kind): the 95% t-interval across seeds, or with one seed `single` (the bootstrap
    interval over images, kind "bootstrap"), or no interval at all (lo = hi = None, kind "n=1")."""
    iv = t_interval(values)
    if iv.half is not None:
        return iv.mean, iv.lo, iv.hi, "t"
    if single is not None and None not in single:
        return iv.mean, float(single[0]), float(single[1]), "bootstrap"
    return iv.mean, None, None, "n=1"


def interval_cell(mean: float, lo, hi, kind: str, digits: int, sign: str = "") -> str:
    if kind == "t":
        return f"{fmt(mean, digits, sign)} ± {fmt((hi - lo) / 2, digits)}"
    if kind == "bootstrap":
        bootstrap = f"[{fmt(lo, digits)}, {fmt(hi, digits)}]"
        return f"{fmt(mean, digits, sign)} (n=1; bootstrap 95% over images {bootstrap})"
    return f"{fmt(mean, digits, sign)} (n=1)"


def fd_spread(rows: dict[int, dict]):
    only = next(iter(rows.values()))
    return spread([m["fd"] for m in rows.values()], only.get("fd_ci95") if len(rows) == 1 else None)


def accuracy_spread(rows: dict[int, dict]):
    return spread([m["accuracy"] for m in rows.values()])


def router_cell(study: list[SeedRecord], case: str) -> str:
    """The router's worst held-out accuracy over the t bins >= 0.5 (no label / label), mean over seeds."""
    worst: dict[str, list[float]] = {key: [] for key in ROUTER_KEYS}
    for record in study:
        by_t = record.routers.get(case, {}).get("accuracy_by_t") or {}
        for key in ROUTER_KEYS:
            if key in by_t:
                t, acc = (np.asarray(by_t[key][k], dtype=float) for k in ("t_mid", "accuracy"))
                if np.any(t >= 0.5):
                    worst[key].append(float(acc[t >= 0.5].min()))
    if not any(worst.values()):
        return "-"
    return " / ".join(fmt(np.mean(v) if v else None, 2) for v in worst.values())


def training_table(study: list[SeedRecord]) -> str:
    lines = [
        "| case | expert | samples in cluster | batch | final loss (mean ± sd over seeds) | wall (s, mean) "
        "| seeds |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case, k, _ in CASES:
        for e in range(k):
            found = {r.seed: x for r in study for x in r.experts.get(case, []) if x["expert"] == e}
            if not found:
                lines.append(f"| {NAMES[case]} | {e} | not run | | | | |")
                continue
            samples = "/".join(str(v) for v in sorted({x["samples"] for x in found.values()}))
            batch = "/".join(str(v) for v in sorted({x["batch"] for x in found.values()}))
            losses = [x["final_loss"] for x in found.values() if x.get("final_loss") is not None]
            mean, sd = mean_sd(losses) if losses else (None, None)
            loss = f"{fmt(mean, 4)} ± {fmt(sd, 4)}" if sd is not None else f"{fmt(mean, 4)} (n={len(losses)})"
            walls = [x["wall_time_s"] for x in found.values() if x.get("wall_time_s") is not None]
            wall = fmt(np.mean(walls) if walls else None, 0)
            lines.append(md_row([NAMES[case], e, samples, batch, loss, wall, seeds_cell(found, study)]))
    return "\n".join(lines)


def main_table(study: list[SeedRecord]) -> str:
    lines = [
        "| case | strategy | seeds | class accuracy (mean ± 95% CI) | FD (mean ± 95% CI) "
        "| FD per seed (± bootstrap se) | FD real vs real | forward passes / image | s / image "
        "| router worst accuracy, t >= 0.5 (no label / label) |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for case, k, strategies in CASES:
        for strategy in strategies:
            rows = by_seed(study, f"{case}_{strategy}")
            head = f"| {NAMES[case]} | {'-' if case == MONOLITH else strategy_name(k, strategy)}"
            if not rows:
                lines.append(f"{head} | not run | | | | | | | |")
                continue
            per_seed = ", ".join(
                fmt(m["fd"], 1) + (f"±{fmt(m['fd_se'], 1)}" if m.get("fd_se") is not None else "")
                for _, m in sorted(rows.items())
            )
            cells = [
                seeds_cell(rows, study),
                interval_cell(*accuracy_spread(rows), digits=3),
                interval_cell(*fd_spread(rows), digits=1),
                per_seed,
                fmt(mean_of(rows, "fd_real_vs_real"), 1),
                fmt(mean_of(rows, "forward_passes_per_image"), 0),
                fmt(mean_of(rows, "seconds_per_image"), 3),
                "-" if case == MONOLITH else router_cell(study, case),
            ]
            lines.append(f"{head} | {' | '.join(cells)} |")
    return "\n".join(lines)


def paired_cell(rows: dict[int, dict], mono: dict[int, dict]) -> tuple[str, str, str]:
    """(seeds, FD(rows) - FD(other) with its interval, seeds below zero) over the seeds in both: the DDM
    against the monolith, or top-1 against another strategy. With one seed, the bootstrap interval of
    the two rows taken as independent (wide where they share their noise)."""
    diffs = paired_differences({s: m["fd"] for s, m in rows.items()}, {s: m["fd"] for s, m in mono.items()})
    if not diffs:
        return "0", "not run", "-"
    single = None
    if len(diffs) == 1:  # the two bootstrap se of one seed, taken as independent
        s = next(iter(diffs))
        se = [rows[s].get("fd_se"), mono[s].get("fd_se")]
        if None not in se:
            half = 1.96 * math.hypot(*se)
            single = [diffs[s] - half, diffs[s] + half]
    cell = interval_cell(*spread(list(diffs.values()), single), digits=1, sign="+")
    return str(len(diffs)), cell, f"{below_zero(diffs.values())} of {len(diffs)}"


def paired_table(study: list[SeedRecord]) -> str:
    lines = [
        "| case | strategy | paired seeds | FD − FD(monolith), same seed (mean ± 95% CI) "
        "| seeds below zero |",
        "|---|---|---:|---:|---:|",
    ]
    mono = by_seed(study, MONOLITH_ROW)
    for case, k, strategies in CASES[1:]:
        for strategy in strategies:
            n, cell, below = paired_cell(by_seed(study, f"{case}_{strategy}"), mono)
            lines.append(md_row([NAMES[case], strategy_name(k, strategy), n, cell, below]))
    return "\n".join(lines)


def strategy_table(study: list[SeedRecord]) -> str:
    """Top-1 against the case's other strategies, within a seed: the paper's question (top-1 best)
    against Paris's (top-2 best). Rows of one seed share their models and sampling noise."""
    lines = [
        "| case | top-1 against | paired seeds | FD(top-1) − FD(other), same seed (mean ± 95% CI) "
        "| seeds below zero |",
        "|---|---|---:|---:|---:|",
    ]
    for case, k, strategies in CASES[1:]:
        top1 = by_seed(study, f"{case}_top1")
        for other in strategies[1:]:
            n, cell, below = paired_cell(top1, by_seed(study, f"{case}_{other}"))
            lines.append(md_row([NAMES[case], strategy_name(k, other), n, cell, below]))
    return "\n".join(lines)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _panel(ax, study: list[SeedRecord], spread_of, ylabel: str) -> None:
    mono = by_seed(study, MONOLITH_ROW)
    if mono:
        mean, lo, hi, _ = spread_of(mono)
        ax.axhline(mean, color="k", ls="--", lw=1, label="monolith")
        if lo is not None:
            ax.axhspan(lo, hi, color="k", alpha=0.12, lw=0)
    for i, (case, _, strategies) in enumerate(CASES[1:]):
        points = [
            (X[s] + 0.08 * (i - 1), spread_of(r)) for s in strategies if (r := by_seed(study, f"{case}_{s}"))
        ]
        if not points:
            continue
        xs = [x for x, _ in points]
        means = np.array([p[0] for _, p in points])
        lo = np.array([p[0] if p[1] is None else p[1] for _, p in points])
        hi = np.array([p[0] if p[2] is None else p[2] for _, p in points])
        ax.errorbar(xs, means, yerr=[means - lo, hi - means], marker="o", capsize=3, label=NAMES[case])
    ax.set_xticks(list(X.values()), ["top1", "top2", "full"])
    ax.set_xlabel("routing strategy (K=2: top2 = full, drawn at full)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def plot_strategies(study: list[SeedRecord], path: Path) -> Path:
    """FD and class accuracy against the strategy, per case; the monolith as a line with its band."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    _panel(axes[0], study, fd_spread, "FD to real test images (lower is better)")
    _panel(axes[1], study, accuracy_spread, "class accuracy (higher is better)")
    floor = mean_of(by_seed(study, MONOLITH_ROW), "fd_real_vs_real")
    if floor is not None:
        axes[0].axhline(floor, color="0.5", ls=":", lw=1, label="real vs real (floor)")
    axes[0].legend(fontsize=8)
    seeds = ", ".join(str(r.seed) for r in study)
    note = "95% t-interval across seeds; with one seed, FD's bootstrap 95% over images (accuracy: none)"
    fig.suptitle(f"Fashion-MNIST, DDM vs monolith, seeds {seeds}\nbars and band: {note}", fontsize=10)
    fig.tight_layout()
    return _save(plt, fig, path)


def plot_paired(study: list[SeedRecord], path: Path) -> Path | None:
    """FD(DDM) - FD(monolith) per case and strategy: each seed a point with its bootstrap 95% (the two
    rows' se taken as independent), the mean across seeds with its t-interval, and zero."""
    mono = by_seed(study, MONOLITH_ROW)
    rows = [
        (f"{NAMES[case]}\n{strategy_name(k, s)}", by_seed(study, f"{case}_{s}"))
        for case, k, strategies in CASES[1:]
        for s in strategies
    ]
    rows = [(name, r) for name, r in rows if r.keys() & mono.keys()]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.2), dpi=120)
    seeds = sorted(mono)
    colors = {s: f"C{i}" for i, s in enumerate(seeds)}
    labelled: set = set()  # one legend entry per seed, and one for the means
    for x, (_, r) in enumerate(rows):
        diffs = paired_differences({s: m["fd"] for s, m in r.items()}, {s: m["fd"] for s, m in mono.items()})
        for s, d in diffs.items():
            se = [r[s].get("fd_se"), mono[s].get("fd_se")]
            half = 1.96 * math.hypot(*se) if None not in se else 0.0
            xs = x - 0.15 + 0.1 * seeds.index(s)  # a seed keeps its place in every row
            label = f"seed {s} (± bootstrap 95% over images)" if s not in labelled else None
            labelled.add(s)
            ax.errorbar(xs, d, yerr=half, fmt="o", color=colors[s], capsize=2, ms=4, alpha=0.8, label=label)
        if len(diffs) > 1:
            iv = t_interval(diffs.values())
            label = "mean across seeds (± 95% t-interval)" if "mean" not in labelled else None
            labelled.add("mean")
            ax.errorbar(x + 0.25, iv.mean, yerr=iv.half, fmt="s", color="k", capsize=4, label=label)
    ax.axhline(0, color="k", lw=1)
    ax.set_xticks(range(len(rows)), [name for name, _ in rows], fontsize=8)
    ax.set_ylabel("FD(DDM) − FD(monolith), same seed\n(below 0: the DDM is better)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.suptitle("Fashion-MNIST: the DDM against the monolith of the same training seed", fontsize=10)
    fig.tight_layout()
    return _save(plt, fig, path)


def plot_samples(study: list[SeedRecord], path: Path) -> Path | None:
    """One row per (case, strategy): its samples row (labels 0..9) from the lowest seed that has one."""
    from PIL import Image

    rows, names = [], []
    for case, k, strategies in CASES:
        for strategy in strategies:
            found = [(r.seed, p) for r in study if (p := r.samples(f"{case}_{strategy}"))]
            if found:
                rows.append(np.asarray(Image.open(found[0][1]).convert("L")))
                names.append(f"{NAMES[case]}, {strategy_name(k, strategy)} (seed {found[0][0]})")
    if not rows:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), 1, figsize=(6, 0.75 * len(rows)), dpi=120)
    for ax, img, name in zip(np.atleast_1d(axes), rows, names, strict=True):
        ax.imshow(img, cmap="gray", vmin=0, vmax=255)
        ax.set_axis_off()
        ax.set_title(name, fontsize=7, loc="left", pad=2)
    fig.tight_layout(h_pad=0.3)
    return _save(plt, fig, path)


def compute_table(study: list[SeedRecord]) -> str:
    """Per seed, the wall time summed over its expert trainings, routers and evaluations: each ran on
    one thread, so this is about its core-hours (two ran at a time on two cores)."""
    lines = [
        "| seed | expert trainings (h) | routers (h) | evaluations (h) | total (h) |",
        "|---:|---:|---:|---:|---:|",
    ]
    sums = []
    for r in study:
        part = (
            sum(x.get("wall_time_s") or 0.0 for xs in r.experts.values() for x in xs),
            sum(x.get("wall_time_s") or 0.0 for x in r.routers.values()),
            sum(m.get("wall_s") or 0.0 for m in r.evals.values()),
        )
        sums.append(part)
        lines.append(md_row([r.seed, *(fmt(s / 3600, 2) for s in (*part, sum(part)))]))
    if len(sums) > 1:
        total = np.sum(sums, axis=0)
        lines.append(md_row(["all", *(fmt(s / 3600, 2) for s in (*total, total.sum()))]))
    return "\n".join(lines)


def header(study: list[SeedRecord], steps: int | None, preset: str | None, batch: int | None) -> str:
    seeds = ", ".join(str(r.seed) for r in study)
    trained = {x.get("steps") for r in study for xs in r.experts.values() for x in xs}
    recorded = sorted(trained - {None})
    if steps is None and recorded:  # what the records say, where no flag said it ("None steps" before)
        steps_text = f"{', '.join(map(str, recorded))} steps (as recorded)"
    else:
        steps_text = f"{steps} steps" if steps is not None else None
    said = [f"preset {preset}" if preset else None, steps_text, f"monolith batch {batch}" if batch else None]
    settings = ", ".join(p for p in said if p) or "settings not given"
    lines = [f"Fashion-MNIST study: {settings}; seeds {seeds}."]
    if steps is not None and trained != {steps}:
        lines.append(f"Note: the records' experts trained {sorted(trained, key=str)} steps, not {steps}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", type=Path, help="the folder of seed<S>/ records, e.g. docs/study")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--preset", default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--out-img", type=Path, default=Path("docs/img"))
    args = p.parse_args(argv)
    study = read_study(args.records)
    print(header(study, args.steps, args.preset, args.batch), end="\n\n")
    for table in (training_table, main_table, paired_table, strategy_table, compute_table):
        print(table(study), end="\n\n")
    print(f"wrote {plot_strategies(study, args.out_img / 'study_fd_by_strategy.png')}")
    paired = plot_paired(study, args.out_img / "study_paired.png")
    print(f"wrote {paired}" if paired else "no DDM row shares a seed with the monolith: no study_paired.png")
    samples = plot_samples(study, args.out_img / "study_samples.png")
    print(f"wrote {samples}" if samples else "no samples rows in the records: no study_samples.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
