"""Reflow (Liu et al., "Flow straight and fast", rectified flow): a few-step student of a routed
ensemble, served as one more expert.

1. Pairs. Noise x0 ~ N(0, I) and a label y are mapped by the routed ensemble, sampled exactly as a
   deployment samples a job (router/sampler.py sample_local: routing at every evaluation, the pair
   solver, grid and guidance), to its image x1. Chunk c of MAX_SAMPLES pairs is job seed `seed + c`
   (its x0 is initial_noise of that job; labels cycle 0..9), written to
   `<pairs dir>/chunk_NNNNN.npz` as soon as it is sampled, so an interrupted generation resumes
   where it stopped; settings.json names the settings and other settings are refused.
2. Student. The experts' training loop (train_loop with a `batch` provider, as ops/distill.py): at
   step s, pairs drawn by rng(seed, s), t ~ U[0, 1), x_t = t x1 + (1 - t) x0, target x1 - x0.
   The ensemble's coupling is deterministic, so the student's flow is much straighter than the
   data's independent coupling, and 1-4 Euler steps land near x1.

Guidance: pairs sampled with guidance g carry the guided flow; the student learns it as its
conditional velocity and is served at guidance 1 (its deployment says so; no null-label rows are
trained, so guidance other than 1 means nothing to it). The student's meta.json `distilled_from`
records method "reflow", the pair settings, count and cost, and `sampling`: how it samples.
"""

from __future__ import annotations

import hashlib
import json
import resource
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ddm.schema.atomic import atomic_path
from ddm.schema.errors import ConfigError, expected
from ddm.schema.sample_space import LEGACY, SampleSpace

REFLOW = "reflow"
PAIRS_SETTINGS = "settings.json"
STUDENT_SAMPLING = {
    "solver": "euler",
    "grid": "uniform",
    "steps": [1, 2, 4],
    "default_steps": 4,
    "guidance": 1.0,
}
STUDENT_SOLVERS = ("euler", "midpoint", "heun")  # one- and two-stage solvers over few steps
STUDENT_GRIDS = ("uniform",)


@dataclass(frozen=True)
class PairSettings:
    """How the ensemble maps noise to images for the pairs (a ddm job's settings)."""

    n: int
    steps: int = 50
    solver: str = "euler"
    grid: str = "uniform"
    guidance: float = 1.0
    strategy: str = "oracle"
    seed: int = 0

    def __post_init__(self):
        if self.n < 1 or self.steps < 1:
            raise ConfigError(expected("--pairs >= 1 and --pair-steps >= 1", (self.n, self.steps)))

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children (core-seconds)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _chunks(n: int) -> list[tuple[int, int]]:
    from ddm.schema.messages import MAX_SAMPLES

    return [(start, min(n, start + MAX_SAMPLES)) for start in range(0, n, MAX_SAMPLES)]


def check_pairs_dir(folder: Path, settings: PairSettings, teachers: list[dict]) -> None:
    """Create folder with settings.json, or refuse one made with other settings or teachers."""
    folder = Path(folder)
    record = {"settings": settings.to_dict(), "teachers": [(t["id"], t["meta_sha256"]) for t in teachers]}
    record = json.loads(json.dumps(record))  # tuples as lists, as read back
    path = folder / PAIRS_SETTINGS
    if path.is_file():
        old = json.loads(path.read_text())
        if old != record:
            raise ConfigError(
                expected(f"pairs in {folder} made with these settings and teachers", f"{record} vs {old}")
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def pair_labels(start: int, stop: int, space: SampleSpace = LEGACY) -> np.ndarray:
    """The labels of pairs start..stop-1: the space's classes in turn (its null class when it has none)."""
    return np.arange(start, stop) % space.num_classes if space.num_classes else np.zeros(stop - start, int)


def missing_chunks(folder: Path, n: int) -> list[int]:
    """The chunks of n pairs not yet in folder."""
    return [c for c in range(len(_chunks(n))) if not (Path(folder) / f"chunk_{c:05d}.npz").is_file()]


def generate_pairs(
    experts: dict,
    policy,
    settings: PairSettings,
    folder: Path,
    progress: bool = True,
    space: SampleSpace = LEGACY,
) -> dict:
    """Sample the missing chunks into folder (check_pairs_dir first). experts: {id: velocity fn}
    (Expert or CountingExpert, as sample_local takes). Returns the cost of this call:
    {chunks_sampled, wall_s, cpu_s}; the running totals are kept in folder/cost.json."""
    from tqdm import tqdm

    from ddm.router.sampler import initial_noise, sample_local
    from ddm.schema.messages import JobSpec
    from ddm.schema.resolved import ResolvedJob

    folder = Path(folder)
    chunks = _chunks(settings.n)
    todo = missing_chunks(folder, settings.n)
    t0, c0 = time.perf_counter(), cpu_seconds()
    total_path = folder / "cost.json"
    total = json.loads(total_path.read_text()) if total_path.is_file() else {"wall_s": 0.0, "cpu_s": 0.0}
    bar = tqdm(total=settings.n, desc="pairs", unit="pair", disable=not progress)
    bar.update(settings.n - sum(chunks[c][1] - chunks[c][0] for c in todo))
    for c in todo:
        t_chunk, c_chunk = time.perf_counter(), cpu_seconds()
        start, stop = chunks[c]
        labels = pair_labels(start, stop, space).tolist()
        spec = JobSpec.new(
            labels,
            steps=settings.steps,
            strategy=settings.strategy,
            guidance=settings.guidance,
            seed=settings.seed + c,
            solver=settings.solver,
            grid=settings.grid,
        )
        x0 = initial_noise(spec, space)
        x1 = sample_local(experts, policy, ResolvedJob.of(spec, space))
        with atomic_path(folder / f"chunk_{c:05d}.npz") as tmp:
            np.savez(tmp, x0=x0, x1=x1.astype(np.float32), y=np.asarray(labels, np.int64))
        # the running totals, after every chunk: an interrupted generation keeps what it spent
        spent = {"wall_s": time.perf_counter() - t_chunk, "cpu_s": cpu_seconds() - c_chunk}
        total = {k: round(total[k] + spent[k], 1) for k in ("wall_s", "cpu_s")}
        total_path.write_text(json.dumps(total) + "\n")
        bar.update(stop - start)
    bar.close()
    return {"chunks_sampled": len(todo), "wall_s": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0}


def load_pairs(folder: Path, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x0, x1 f32 [n,1,32,32], y i64 [n]) from the chunks; ConfigError if any is missing."""
    folder = Path(folder)
    parts = []
    for c in range(len(_chunks(n))):
        path = folder / f"chunk_{c:05d}.npz"
        if not path.is_file():
            raise ConfigError(
                expected(f"pair chunk {path} (run the same command to finish the pairs)", "none")
            )
        with np.load(path) as z:
            parts.append((z["x0"], z["x1"], z["y"]))
    x0, x1, y = (np.concatenate(a) for a in zip(*parts, strict=True))
    return x0, x1, y


def pairs_digest(x0: np.ndarray, x1: np.ndarray, y: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in (x0, x1, y):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def pairs_cost(folder: Path) -> dict:
    path = Path(folder) / "cost.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def reflow_batch(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, cfg):
    """The train_loop batch provider, pure in the step: pairs by rng(cfg.seed, step), t ~ U[0, 1),
    x_t = t x1 + (1 - t) x0, target x1 - x0, the pairs' labels (no dropout)."""

    def batch(step: int):
        rng = np.random.default_rng([cfg.seed, step])
        idx = rng.integers(0, len(x0), size=cfg.batch)
        t = rng.random(cfg.batch, dtype=np.float32)
        a, b = x0[idx], x1[idx]
        tt = t[:, None, None, None]
        return (
            (tt * b + (1 - tt) * a).astype(np.float32),
            t,
            y[idx].astype(np.int64),
            (b - a).astype(np.float32),
        )

    return batch


def reflow_record(settings: PairSettings, cost: dict, digest: str, init_from: str | None) -> dict:
    """What `distilled_from` adds for a reflow student."""
    return {
        "method": REFLOW,
        "pairs": {**settings.to_dict(), "sha256": digest, "cost": cost},
        "init_from": init_from,
        "guidance": 1.0,  # served at 1: the pairs' guidance is inside its flow
        "sampling": dict(STUDENT_SAMPLING),
    }


def init_student(trainer, framework: str, folder: Path) -> None:
    """Start the student (model and EMA) from an expert checkpoint's weights of the same architecture
    and preset (torch trainers)."""
    if framework != "torch":
        raise ConfigError(expected("--init-from with a torch student", framework))
    import torch

    from ddm.workers.torch_expert.checkpoint import load_weights

    state = {k: torch.from_numpy(np.asarray(v)) for k, v in load_weights(Path(folder)).items()}
    trainer.model.load_state_dict(state)
    trainer.ema.load_state_dict(state)


def student_offer() -> dict:
    """The student's deployment [sampling] table: few-step solvers on the uniform grid, Euler default."""
    return {
        "solver": "euler",
        "grid": "uniform",
        "solvers": list(STUDENT_SOLVERS),
        "grids": list(STUDENT_GRIDS),
    }


def training_cpu_before(out: Path) -> float:
    """CPU seconds of the student's earlier (resumed) runs, as recorded in out/meta.json."""
    from ddm.schema.checkpoint_meta import META_FILE, read_meta

    if not (Path(out) / META_FILE).is_file():
        return 0.0
    cost = read_meta(out, kind="expert").get("distilled_from", {}).get("training_cost") or {}
    return float(cost.get("cpu_s", 0.0))


def stamp_training_cost(out: Path, cpu_s: float) -> dict:
    """Add distilled_from.training_cost {steps, wall_s, cpu_s} to out/meta.json; return the meta.
    cpu_s counts the runs that reached their end (a run killed between checkpoints is not in it)."""
    from ddm.schema.checkpoint_meta import read_meta, write_meta

    meta = read_meta(out, kind="expert")
    cost = {"steps": meta["steps"], "wall_s": meta.get("wall_time_s"), "cpu_s": round(cpu_s, 1)}
    meta = {**meta, "distilled_from": {**meta["distilled_from"], "training_cost": cost}}
    write_meta(out, meta)
    return meta
