"""`ddm eval --sweep OUT.json`: quality against the number of evaluations (NFE), for every solver and grid.

    ddm eval --deployment checkpoints/mnist/deployment.toml --sweep checkpoints/mnist/nfe_sweep.json \\
        --nfe 4,6,8,12,16,25,50 --n 50 --plot docs/img/nfe_sweep_mnist.png

One point is (solver, grid, NFE asked). Its steps are NFE // evaluations per step (Solver.stages): Heun
and midpoint take two per step, so an odd NFE is rounded DOWN to the next even one (25 -> 12 steps, 24
evaluations) and the point records both "nfe_asked" and the real "nfe". Every point samples the same
images from the same noise (labels cycling 0-9, chunk c seeded seed + c, as `ddm eval`), so points are
paired: their differences are differences of the sampler alone.

Each point is scored as `ddm eval` scores (evaluate.score_features: class accuracy with a 95% bootstrap
interval over images, FD with its bootstrap se and interval), against the reference, 50-step Euler on
the uniform grid (today's default), which is always measured, first: the accuracy difference in points
and the FD ratio, with 95% PAIRED bootstrap intervals (the same image rows and real rows redrawn for
both, which the fixed bootstrap seeds give for free; the reference's draws are kept in the JSON).

Resumable: the JSON is rewritten (atomically) after every point; run the same command again and only the
missing points are sampled. The settings that make points comparable (deployment, strategy, guidance, n,
seed, real split, classifier) are in the file, and a run with other settings is refused rather than mixed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.schema.atomic import write_json_atomic
from ddm.schema.errors import ConfigError, expected
from ddm.schema.solver import Grid, Solver

DEFAULT_NFES = (4, 6, 8, 12, 16, 25, 50)
REFERENCE = ("euler", "uniform", 50)  # what every point is compared with: today's default sampler
KIND = "ddm-nfe-sweep"
# The goal of issue 26: accuracy within 1 point and FD within 10% of the reference.
ACCURACY_TOLERANCE = 0.01
FD_TOLERANCE = 1.10
# FD bootstrap redraws per point: 100, not `ddm eval`'s 200, for a sweep of ~100 points on a shared CPU;
# the same count and seed at every point keeps the draws paired
FD_RESAMPLES = 100


@dataclass(frozen=True)
class SweepPoint:
    """One point of the sweep: a solver, a grid, and the evaluations asked for."""

    solver: str
    grid: str
    nfe_asked: int

    @property
    def steps(self) -> int:
        return self.nfe_asked // Solver.parse(self.solver).stages

    @property
    def nfe(self) -> int:
        """The evaluations the point really takes (<= nfe_asked: a two-stage solver rounds down)."""
        return Solver.parse(self.solver).nfe(self.steps)

    @property
    def key(self) -> str:
        return f"{self.solver} {self.grid} {self.nfe_asked}"


def sweep_points(nfes: Iterable[int], solvers: Iterable[str], grids: Iterable[str]) -> list[SweepPoint]:
    """The reference first, then every (solver, grid) by NFE, fewest first (the few-step points are
    what a default is chosen from; an interrupted sweep has them). A point with no step (NFE 1 for
    Heun) is refused."""
    solvers = [str(Solver.parse(s)) for s in solvers]
    grids = [str(Grid.parse(g)) for g in grids]
    points = [SweepPoint(*REFERENCE)]
    for nfe in sorted(set(nfes)):
        for solver in solvers:
            for grid in grids:
                point = SweepPoint(solver, grid, nfe)
                if point.steps < 1:
                    raise ConfigError(expected(f"NFE >= {Solver.parse(solver).stages} for {solver}", nfe))
                if point != points[0]:
                    points.append(point)
    return points


def parse_list(text: str, what: str, parse: Callable = str) -> list:
    """'4,6,8' -> [4, 6, 8] (a flag's comma-separated list)."""
    try:
        items = [parse(t.strip()) for t in text.split(",") if t.strip()]
    except ValueError:
        items = []
    if not items:
        raise ConfigError(expected(f"{what} as a comma-separated list", text))
    return items


def read_sweep(path: Path) -> dict:
    """A sweep file written by `ddm eval --sweep` (ConfigError otherwise)."""
    if not path.is_file():
        raise ConfigError(expected("a sweep file written by `ddm eval --sweep`", f"{path} (not found)"))
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(record, dict) or record.get("kind") != KIND:
        raise ConfigError(expected(f"a sweep file written by `ddm eval --sweep` (kind {KIND})", path))
    for point in record["points"]:
        if "fd_ratio_draws95" not in point:  # written before ratio_interval: fd_ratio_ci95 held the draws'
            point["fd_ratio_draws95"] = point["fd_ratio_ci95"]
            point["fd_ratio_ci95"] = ratio_interval(point["fd_ratio"], point["fd_ratio_draws95"])
    return record


def load_sweep(path: Path, settings: dict) -> dict:
    """The sweep file at path to continue (its settings must equal these), else a new one."""
    if not path.is_file():
        return {"kind": KIND, "settings": settings, "points": []}
    record = read_sweep(path)
    differ = {
        k: (record["settings"].get(k), v) for k, v in settings.items() if record["settings"].get(k) != v
    }
    if differ:
        told = ", ".join(f"{k}: file {a!r}, now {b!r}" for k, (a, b) in differ.items())
        raise ConfigError(
            f"{path} was measured with other settings ({told}); points would not compare: "
            "give another --sweep file, or the file's settings to continue it"
        )
    return record


def compare_to_reference(result: dict, reference: dict) -> dict:
    """A point's accuracy difference (in points of the fraction, negative = worse) and FD ratio against
    the reference, with 95% paired bootstrap intervals: the accuracy difference's percentile interval;
    for the ratio, ratio_interval of the paired draws' percentile interval (kept as fd_ratio_draws95)."""
    from ddm.ops.eval.evaluate import accuracy_draws

    mine = np.array([c == "1" for c in result["correct"]])
    theirs = np.array([c == "1" for c in reference["correct"]])
    delta = accuracy_draws(mine) - accuracy_draws(theirs)  # same seed, same n: the same rows
    ratio = np.asarray(result["fd_draws"]) / np.asarray(reference["fd_draws"])
    draws95 = [float(v) for v in np.percentile(ratio, [2.5, 97.5])]
    fd_ratio = result["fd"] / reference["fd"]
    return {
        "accuracy_delta": result["accuracy"] - reference["accuracy"],
        "accuracy_delta_ci95": [float(v) for v in np.percentile(delta, [2.5, 97.5])],
        "fd_ratio": fd_ratio,
        "fd_ratio_ci95": ratio_interval(fd_ratio, draws95),
        "fd_ratio_draws95": draws95,
    }


def ratio_interval(ratio: float, draws95: list[float]) -> list[float]:
    """The FD ratio's 95% interval: the paired draws' percentile interval, recentred on the ratio in log
    scale. A redraw repeats rows, which adds FD's small-sample bias to both FDs and pulls their ratio
    toward 1 (a ratio of 1.7 can have draws between 1.1 and 1.5), so, as frechet_bootstrap does, the
    draws' spread is kept and their location is not."""
    lo, hi = draws95
    half = np.sqrt(hi / lo) if lo > 0 else np.inf
    return [float(ratio / half), float(ratio * half)]


def run_sweep(
    path: Path,
    settings: dict,
    points: list[SweepPoint],
    sample: Callable[[SweepPoint], tuple[np.ndarray, np.ndarray, dict]],
    score: Callable[[np.ndarray, np.ndarray], dict],
    progress: bool = True,
    facts: dict | None = None,
) -> dict:
    """Measure the points the file at path lacks, writing it after each. sample(point) -> (x, labels,
    cost); score(x, labels) -> evaluate.score_features(..., keep_draws=True); facts: what the file
    records beside the points (the real-vs-real floor). Returns the record."""
    from tqdm import tqdm

    record = load_sweep(path, settings)
    record.update(facts or {})
    write_json_atomic(path, record)
    done = {SweepPoint(p["solver"], p["grid"], p["nfe_asked"]).key for p in record["points"]}
    todo = [p for p in points if p.key not in done]
    bar = tqdm(total=len(points), initial=len(points) - len(todo), desc="sweep", disable=not progress)
    for point in todo:
        bar.set_postfix_str(f"{point.solver} {point.grid} NFE {point.nfe}")
        x, labels, cost = sample(point)
        result = score(x, labels)
        if point.key == SweepPoint(*REFERENCE).key:
            record["reference"] = {
                "solver": point.solver,
                "grid": point.grid,
                "nfe": point.nfe,
                **{k: result[k] for k in ("accuracy", "fd", "correct", "fd_draws")},
            }
        entry = {
            "solver": point.solver,
            "grid": point.grid,
            "nfe_asked": point.nfe_asked,
            "steps": point.steps,
            "nfe": point.nfe,
            **{k: v for k, v in result.items() if k not in ("correct", "fd_draws")},
            **compare_to_reference(result, record["reference"]),
            **{k: cost[k] for k in ("forward_passes_per_image", "seconds_per_image", "wall_s")},
        }
        record["points"].append(entry)
        write_json_atomic(path, record)
        bar.update(1)
    bar.close()
    return record


def evaluate_sweep(
    deployment_path: Path,
    out: Path,
    *,
    nfes: Iterable[int] = DEFAULT_NFES,
    solvers: Iterable[str] | None = None,
    grids: Iterable[str] | None = None,
    n: int = 500,
    strategy: str | None = None,
    guidance: float | None = None,
    seed: int = 0,
    classifier: Path | None = None,
    real_split: str = "test[8000:]",
    device: str | None = None,
    data_dir: str | None = None,
    progress: bool = True,
) -> dict:
    """Sweep a deployment's solvers and grids (default: the ones its [sampling] table offers) over nfes,
    n images a point, into the resumable JSON at out. Returns the record."""
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.eval.classifier import WEIGHTS, features, load_classifier, predict
    from ddm.ops.eval.evaluate import (
        CountingExpert,
        display_path,
        real_floor,
        sample_counted,
        score_features,
        to_pictures,
    )
    from ddm.ops.eval.frechet import FrechetBootstrap
    from ddm.ops.eval.strategy_choice import eval_strategy
    from ddm.router.deployment_loader import load_decoder, load_experts, load_policy
    from ddm.schema.checkpoint_meta import file_sha256
    from ddm.schema.deployment import Deployment
    from ddm.schema.strategy import Strategy

    deployment = Deployment.load(deployment_path)
    strategy, _ = eval_strategy(deployment, strategy)
    guidance = deployment.guidance if guidance is None else guidance
    points = sweep_points(nfes, solvers or deployment.sampling.solvers, grids or deployment.sampling.grids)
    # the classifier and the real images first: a missing one fails before minutes of sampling
    classifier = Path(classifier or deployment.path.parent / "classifier")
    model, meta = load_classifier(classifier)
    real = load_dataset(meta["dataset"], real_split, data_dir)
    real_f = features(model, real.as_model_input())
    bootstrap = FrechetBootstrap(real_f, n, FD_RESAMPLES)  # the real side of every redraw, once
    settings = {
        "deployment": display_path(deployment.path),
        "strategy": strategy,
        "guidance": guidance,
        "n": n,
        "seed": seed,
        "real_split": real.split,
        "classifier": display_path(classifier),
        "classifier_sha256": file_sha256(classifier / WEIGHTS)[:16],
    }
    loaded: dict = {}

    def sample(point: SweepPoint):
        if not loaded:  # only when a point is missing: a finished sweep re-renders in seconds
            policy = load_policy(deployment)
            policy.check_strategy(Strategy.parse(strategy))
            loaded["policy"] = policy
            experts = load_experts(deployment, device=device)
            loaded["experts"] = {k: CountingExpert(e) for k, e in experts.items()}
            loaded["decoder"] = load_decoder(deployment, device=device)
        x, labels, cost = sample_counted(
            loaded["experts"],
            loaded["policy"],
            n,
            strategy,
            point.steps,
            guidance,
            seed,
            solver=point.solver,
            grid=point.grid,
            progress=False,
            space=deployment.sample_space,
        )
        return to_pictures(loaded["decoder"], x, cost), labels, cost

    def score(x, labels):
        return score_features(
            predict(model, x).argmax(1),
            labels,
            features(model, x),
            real_f,
            keep_draws=True,
            bootstrap=bootstrap,
        )

    out.parent.mkdir(parents=True, exist_ok=True)
    facts = {**real_floor(real_f, n), "classifier_test_accuracy": meta.get("test_accuracy")}
    return run_sweep(out, settings, points, sample, score, progress=progress, facts=facts)


# -- the report --------------------------------------------------------------------------------------


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
