"""A study seed's small, committed records, and their reader (ops/study/tables.py reads them).

    python -m ddm.ops.study.records runs/study17/seed0 docs/study/seed0 [--allow-missing]

From one seed's run folder of ops/study/study.sh (models, logs, eval folders) it writes, without the
models, what the tables need, so seeds trained in different sessions can be combined later:

    <records>/eval/<row>.json      the row's metrics.json, as is (row: fashion_kmeans4_topk2, ...)
    <records>/samples/<row>.png    the first row of the row's samples.png (labels 0..9), small
    <records>/experts.json         {"seed": S, "cases": {case: [per expert: expert, samples,
                                   label_counts, batch, final_loss, wall_time_s, steps, seed]}}
    <records>/routers.json         {"seed": S, "cases": {case: {accuracy_by_t, wall_time_s, steps,
                                   final_loss}}}

Missing pieces fail by default, before anything is written, with every missing path listed: a records
folder is committed and later read as one finished seed, and a partial one would quietly give rows
different seed counts and unpair the FD(DDM) - FD(monolith) table. study.sh only gets here after every
eval succeeded, so a gap means something went wrong. `--allow-missing` writes what exists and prints
what is missing (to salvage an interrupted session; the tables then say "not run" for those rows).
Running it twice rewrites the same files.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.atomic import write_json_atomic
from ddm.schema.checkpoint_meta import META_FILE, read_meta
from ddm.schema.errors import ConfigError, expected

CASES = (  # (case, number of experts, strategies as eval folder suffixes); see study.sh
    ("fashion_mono", 1, ("top1",)),
    ("fashion_kmeans2", 2, ("top1", "full")),
    ("fashion_kmeans4", 4, ("top1", "topk2", "full")),
    ("fashion_random2", 2, ("top1", "full")),
)
MONOLITH = "fashion_mono"
ROWS = tuple(f"{case}_{strategy}" for case, _, strategies in CASES for strategy in strategies)
SAMPLE_COLS = 10  # samples.png: one column per label 0..9 (ops/eval/evaluate.py write_report)


def expert_record(meta: dict) -> dict:
    counts = meta.get("label_counts") or []
    return {
        "expert": meta.get("expert"),
        "samples": int(sum(counts)),
        "label_counts": counts,
        **{k: meta.get(k) for k in ("batch", "final_loss", "wall_time_s", "steps")},
        "seed": meta.get("train", {}).get("seed"),
    }


def collect_experts(run: Path, missing: list[str]) -> dict[str, list[dict]]:
    """Every finished expert's record by case; unfinished or absent experts go to `missing`."""
    cases: dict[str, list[dict]] = {}
    for case, k, _ in CASES:
        for e in range(k):
            folder = run / case / f"expert{e}"
            if not (folder / META_FILE).is_file():
                missing.append(str(folder / META_FILE))
                continue
            meta = read_meta(folder, kind="expert")
            target = meta.get("train", {}).get("steps")
            if target is not None and meta.get("steps") != target:  # a checkpoint written mid-training
                missing.append(f"{folder} (trained {meta.get('steps')} of {target} steps)")
                continue
            cases.setdefault(case, []).append(expert_record(meta))
    return cases


def collect_routers(run: Path, missing: list[str]) -> dict[str, dict]:
    """Each DDM case's router: its held-out accuracy by t and what its training cost."""
    cases = {}
    for case, _, _ in CASES:
        folder = run / case / "router"
        if case == MONOLITH:
            continue
        meta = read_meta(folder, kind="router") if (folder / META_FILE).is_file() else {}
        if "accuracy_by_t" not in meta:
            missing.append(f"{folder / META_FILE} with accuracy_by_t")
            continue
        cases[case] = {k: meta.get(k) for k in ("accuracy_by_t", "wall_time_s", "steps", "final_loss")}
    return cases


def collect_evals(run: Path, missing: list[str]) -> dict[str, Path]:
    """row -> its eval folder, for the rows with both metrics.json and samples.png."""
    found = {}
    for row in ROWS:
        folder = run / "eval" / row
        absent = [str(folder / f) for f in ("metrics.json", "samples.png") if not (folder / f).is_file()]
        missing.extend(absent)
        if not absent:
            found[row] = folder
    return found


def the_seed(experts: dict[str, list[dict]], evals: dict[str, Path]) -> int:
    """The one seed every expert was trained with and every eval sampled with."""
    seeds = {r["seed"] for records in experts.values() for r in records if r["seed"] is not None}
    seeds |= {json.loads((f / "metrics.json").read_text()).get("seed") for f in evals.values()}
    seeds.discard(None)
    if len(seeds) != 1:
        raise ConfigError(expected("one training/sampling seed in the seed's run folder", sorted(seeds)))
    return int(seeds.pop())


def first_samples_row(src: Path, dst: Path) -> None:
    """The top row of a samples.png grid (10 columns, one per label) as a small PNG."""
    from PIL import Image

    with Image.open(src) as img:
        gray = img.convert("L")
    rows = max(1, round(SAMPLE_COLS * gray.height / gray.width))  # square cells: rows from the aspect
    dst.parent.mkdir(parents=True, exist_ok=True)
    gray.crop((0, 0, gray.width, math.ceil(gray.height / rows))).save(dst, optimize=True)


def write_records(run: Path, out: Path, allow_missing: bool = False) -> list[str]:
    """Write the records of one seed's run folder to `out`; returns what was missing (see module doc)."""
    missing: list[str] = []
    experts, routers = collect_experts(run, missing), collect_routers(run, missing)
    evals = collect_evals(run, missing)
    if missing and not allow_missing:
        listing = "\n  ".join(missing)
        raise ConfigError(f"{run}: expected a finished study seed (study.sh), missing:\n  {listing}")
    seed = the_seed(experts, evals)
    for stale in (out / "eval", out / "samples"):  # a row gone from the run must not linger here
        shutil.rmtree(stale, ignore_errors=True)
    for row, folder in evals.items():
        (out / "eval").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "metrics.json", out / "eval" / f"{row}.json")
        first_samples_row(folder / "samples.png", out / "samples" / f"{row}.png")
    write_json_atomic(out / "experts.json", {"seed": seed, "cases": experts})
    write_json_atomic(out / "routers.json", {"seed": seed, "cases": routers})
    return missing


@dataclass(frozen=True)
class SeedRecord:
    """One seed's records as read back: eval metrics by row, experts and routers by case."""

    seed: int
    folder: Path
    evals: dict[str, dict]
    experts: dict[str, list[dict]]
    routers: dict[str, dict]

    def samples(self, row: str) -> Path | None:
        path = self.folder / "samples" / f"{row}.png"
        return path if path.is_file() else None


def read_seed(folder: Path) -> SeedRecord:
    if not (folder / "experts.json").is_file():
        raise ConfigError(expected(f"{folder}/experts.json (python -m ddm.ops.study.records)", "no file"))
    experts = json.loads((folder / "experts.json").read_text())
    routers_path = folder / "routers.json"
    routers = json.loads(routers_path.read_text())["cases"] if routers_path.is_file() else {}
    paths = {row: folder / "eval" / f"{row}.json" for row in ROWS}
    evals = {row: json.loads(path.read_text()) for row, path in paths.items() if path.is_file()}
    return SeedRecord(int(experts["seed"]), folder, evals, experts["cases"], routers)


def read_study(root: Path) -> list[SeedRecord]:
    """Every seed<S>/ records folder under root, sorted by seed; fails on none or on a repeated seed."""
    records = sorted((read_seed(f) for f in root.glob("seed*") if f.is_dir()), key=lambda r: r.seed)
    if not records:
        raise ConfigError(expected(f"seed<S>/ records folders under {root}", "none"))
    seeds = [r.seed for r in records]
    if len(set(seeds)) != len(seeds):
        raise ConfigError(expected(f"one records folder per seed under {root}", seeds))
    return records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="one seed's run folder, e.g. runs/study17/seed0")
    p.add_argument("records", type=Path, help="where the records go, e.g. docs/study/seed0")
    p.add_argument("--allow-missing", action="store_true", help="write what exists; print what is missing")
    args = p.parse_args(argv)
    missing = write_records(args.run, args.records, args.allow_missing)
    for path in missing:
        print(f"missing: {path}")
    print(f"wrote {args.records} ({len(ROWS) - sum(m.endswith('metrics.json') for m in missing)} eval rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
