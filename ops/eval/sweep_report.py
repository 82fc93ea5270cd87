"""The report of an NFE sweep (ops/eval/sweep.py): the table `ddm eval --sweep` prints, the
recommendation (the fewest evaluations within the goal of the 50-step Euler reference) and the plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.ops.eval.sweep import ACCURACY_TOLERANCE, FD_TOLERANCE, REFERENCE


def _cells(record: dict) -> tuple[list[tuple[str, str]], list[int], dict]:
    points = record["points"]
    rows = list(
        dict.fromkeys((p["solver"], p["grid"]) for p in points if (p["solver"], p["grid"]) != REFERENCE[:2])
    )
    rows.insert(0, REFERENCE[:2])
    nfes = sorted({p["nfe_asked"] for p in points})
    at = {(p["solver"], p["grid"], p["nfe_asked"]): p for p in points}
    return rows, nfes, at


def sweep_table(record: dict) -> str:
    """Markdown: one table of class accuracy and one of FD (rows solver/grid, columns NFE), each cell with
    its 95% bootstrap interval, the settings, the floor, and the cheapest point within the goal."""
    rows, nfes, at = _cells(record)
    s = record["settings"]
    head = "| solver | grid | " + " | ".join(f"NFE {n}" for n in nfes) + " |\n"
    head += "|---|---|" + "---:|" * len(nfes)

    def table(cell) -> str:
        lines = [head]
        for solver, grid in rows:
            cells = [cell(at[(solver, grid, n)]) if (solver, grid, n) in at else "" for n in nfes]
            lines.append(f"| {solver} | {grid} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def mark(p) -> str:  # a two-stage solver at an odd NFE ran one evaluation fewer
        return f" ({p['nfe']})" if p["nfe"] != p["nfe_asked"] else ""

    def acc(p) -> str:
        lo, hi = p["accuracy_ci95"]
        return f"{100 * p['accuracy']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]{mark(p)}"

    def fd(p) -> str:
        lo, hi = p["fd_ci95"]
        return f"{p['fd']:.1f} [{lo:.1f}, {hi:.1f}]{mark(p)}"

    def rel(p) -> str:
        (alo, ahi), (flo, fhi) = p["accuracy_delta_ci95"], p["fd_ratio_ci95"]
        return (
            f"{100 * p['accuracy_delta']:+.1f} [{100 * alo:+.1f}, {100 * ahi:+.1f}] / "
            f"{p['fd_ratio']:.2f} [{flo:.2f}, {fhi:.2f}]{mark(p)}"
        )

    floor = record.get("fd_real_vs_real")
    parts = [
        f"`{s['deployment']}`, strategy {s['strategy']}, guidance {s['guidance']}, {s['n']} images a point "
        f"(the same noise at every point, seed {s['seed']}), FD against {s['real_split']} by "
        f"`{s['classifier']}` (sha256 {s['classifier_sha256']})"
        + (f"; real vs real at this n: FD {floor:.1f}" if floor is not None else "")
        + ". Cells: value [95% bootstrap interval over images]; (N): the NFE really taken.",
        "",
        "Class accuracy (%):",
        "",
        table(acc),
        "",
        "FD:",
        "",
        table(fd),
        "",
        "Against 50-step Euler (uniform): accuracy difference in points / FD ratio, paired 95% intervals:",
        "",
        table(rel),
        "",
        recommendation_line(record),
    ]
    return "\n".join(parts)


def within_goal(p: dict, sure: bool = False) -> bool:
    """Accuracy within 1 point and FD within 10% of the reference: by the point estimates, or (sure) by
    the whole paired 95% intervals."""
    if sure:
        return p["accuracy_delta_ci95"][0] >= -ACCURACY_TOLERANCE and p["fd_ratio_ci95"][1] <= FD_TOLERANCE
    return p["accuracy_delta"] >= -ACCURACY_TOLERANCE and p["fd_ratio"] <= FD_TOLERANCE


def recommend(record: dict, max_nfe: int = 10, sure: bool = False) -> dict | None:
    """The cheapest point (fewest real NFE, then lowest FD) of at most max_nfe evaluations within the
    goal (within_goal), else None."""
    fits = [p for p in record["points"] if p["nfe"] <= max_nfe and within_goal(p, sure)]
    return min(fits, key=lambda p: (p["nfe"], p["fd"]), default=None)


def recommendation_line(record: dict, max_nfe: int = 10) -> str:
    """The cheapest points within the goal at <= max_nfe evaluations, by estimate and by interval."""
    lines = []
    for sure, how in ((False, "by the point estimates"), (True, "with the whole paired intervals inside")):
        best = recommend(record, max_nfe, sure)
        if best is None:
            lines.append(f"No point of at most {max_nfe} evaluations is within the goal {how}.")
            continue
        lines.append(
            f"Cheapest point of at most {max_nfe} evaluations within the goal (accuracy within 1 point, FD "
            f"within 10% of 50-step Euler) {how}: {best['solver']} on {best['grid']} at NFE {best['nfe']} "
            f"({best['steps']} steps): accuracy {100 * best['accuracy_delta']:+.1f} points, FD "
            f"x{best['fd_ratio']:.2f}."
        )
    return "\n\n".join(lines)


def plot_sweep(record: dict, path: Path) -> None:
    """Accuracy and FD against real NFE (log axis), one panel row per grid, one colour per solver, the
    reference as a dashed line with the goal's band, 95% intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, _, _ = _cells(record)
    grids = list(dict.fromkeys(g for _, g in rows))
    solvers = list(dict.fromkeys(s for s, _ in rows))
    colours = dict(zip(solvers, plt.get_cmap("tab10").colors, strict=False))
    ref = record.get("reference")
    fig, axes = plt.subplots(len(grids), 2, figsize=(10, 2.8 * len(grids)), dpi=110, squeeze=False)
    for r, grid in enumerate(grids):
        for solver in solvers:
            pts = sorted(
                (p for p in record["points"] if (p["solver"], p["grid"]) == (solver, grid)),
                key=lambda p: p["nfe"],
            )
            if not pts:
                continue
            x = [p["nfe"] for p in pts]
            for c, (key, scale) in enumerate((("accuracy", 100.0), ("fd", 1.0))):
                y = np.array([p[key] * scale for p in pts])
                ci = np.array([p[f"{key}_ci95"] for p in pts]) * scale
                err = np.stack([y - ci[:, 0], ci[:, 1] - y])
                axes[r, c].errorbar(
                    x, y, yerr=err, marker="o", ms=3, capsize=2, color=colours[solver], label=solver
                )
        if ref is not None:
            axes[r, 0].axhline(100 * ref["accuracy"], color="k", ls="--", lw=1, label="Euler 50")
            axes[r, 0].axhspan(
                100 * (ref["accuracy"] - ACCURACY_TOLERANCE), 100 * ref["accuracy"], color="k", alpha=0.08
            )
            axes[r, 1].axhline(ref["fd"], color="k", ls="--", lw=1, label="Euler 50")
            axes[r, 1].axhspan(ref["fd"], ref["fd"] * FD_TOLERANCE, color="k", alpha=0.08)
        for c, label in enumerate(("class accuracy (%)", "FD")):
            ax = axes[r, c]
            ax.set_xscale("log")
            ticks = sorted({p["nfe_asked"] for p in record["points"]})  # 24 (Heun at 25) sits by 25
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(t) for t in ticks])
            ax.minorticks_off()
            ax.set_ylabel(label)
            ax.set_title(f"grid {grid}", fontsize=9)
            ax.grid(alpha=0.3)
        if r == len(grids) - 1:
            axes[r, 0].set_xlabel("evaluations per image (NFE)")
            axes[r, 1].set_xlabel("evaluations per image (NFE)")
    axes[0, 1].legend(fontsize=7, ncol=2)
    for r in range(len(grids)):
        axes[r, 1].set_yscale("log")
        if ref is not None:  # near the goal; far worse points leave the panel (the table has them)
            axes[r, 0].set_ylim(max(0.0, 100 * ref["accuracy"] - 12), 100.5)
            axes[r, 1].set_ylim(ref["fd"] / 2, ref["fd"] * 8)
    s = record["settings"]
    fig.suptitle(
        f"{s['deployment']}: {s['strategy']}, guidance {s['guidance']}, n={s['n']}; "
        "grey: the goal; off-panel points: see the table",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
