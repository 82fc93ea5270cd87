"""The framework-free half of expert training: config, batches, schedules, the loop; and FitOptions, the
optimisation settings of the small models trained beside the experts (router, autoencoder, evaluation
classifier, image tower).

Both trainers (workers/torch_expert/train.py, workers/jax_expert/train.py) plug into `train_loop`;
everything random about a batch comes from numpy here, so a batch is a pure function of
(seed, step): resuming needs only the step, and both frameworks see identical data for a seed.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm import tqdm

from ddm.schema.checkpoint_meta import kind_of, read_meta, write_meta
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.expert_card import FLOW_VELOCITY, T0_NOISE, Objective, card_of, stamp_card
from ddm.schema.flow import NULL_CLASS, interpolate, target_velocity
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.text_conditions import PromptTable


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "small"
    steps: int = 3000
    batch: int = 64
    lr: float = 1e-3
    warmup: int = 100
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio at the last step
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    ema_decay: float = 0.999
    label_dropout: float = 0.1  # classifier-free guidance: p(label -> null class)
    seed: int = 0
    save_every: int = 500
    # what the network learns to predict (schema/expert_card.py): flow-velocity (the default, this
    # system's own), ddpm-eps, ddpm-x0, ddpm-v; a ddpm-* one under `schedule` ("" = linear, or e.g.
    # "cosine:s=0.008"), its time input per `time_convention` (t0-noise | t0-data). The card says so.
    objective: str = FLOW_VELOCITY
    schedule: str = ""
    time_convention: str = T0_NOISE

    def __post_init__(self):
        if self.steps < 1 or self.batch < 1:
            raise ConfigError(expected("steps >= 1 and batch >= 1", (self.steps, self.batch)))
        if not 0.0 <= self.label_dropout < 1.0:
            raise ConfigError(expected("label_dropout in [0, 1)", self.label_dropout))
        self.objective_record()  # refuses an unknown objective, schedule or time convention, naming the known

    def objective_record(self) -> Objective:
        """The objective this run trains, as the card records it."""
        try:
            return Objective.parse(self.objective, self.schedule or None, self.time_convention)
        except SchemaError as exc:
            raise ConfigError(str(exc)) from None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """How long and how a small model is fitted: the router (router/train_router.py), the autoencoder
    (workers/autoencoder/train.py), the evaluation classifier and the image tower (ops/eval/). Each
    trainer has its own default instance.

    Exactly one of steps (optimiser steps: the router and the autoencoder) and epochs (passes over the
    data: the classifier and the image tower): a trainer reads its length with `length(unit)`, which
    refuses a record counted in the other unit rather than read 15 epochs as 15 steps."""

    steps: int | None = None
    epochs: int | None = None
    batch: int
    lr: float = 2e-3
    seed: int = 0
    progress: bool = True  # a progress bar

    def __post_init__(self):
        if (self.steps is None) == (self.epochs is None):
            raise ConfigError(expected("exactly one of steps and epochs", (self.steps, self.epochs)))
        if self.count < 1 or self.batch < 1:
            raise ConfigError(expected(f"{self.unit} >= 1 and batch >= 1", (self.count, self.batch)))

    @property
    def unit(self) -> str:
        return "steps" if self.steps is not None else "epochs"

    @property
    def count(self) -> int:
        """The length, in `unit`."""
        return self.steps if self.steps is not None else self.epochs

    def length(self, unit: str) -> int:
        """The fit's length in `unit` ("steps" | "epochs"), the one its trainer counts in."""
        if unit != self.unit:
            raise ConfigError(expected(f"a fit counted in {unit}", f"{self.unit}={self.count}"))
        return self.count

    def record(self) -> dict:
        """What a checkpoint's meta.json records of the fit: its length (under its unit), batch and lr."""
        return {self.unit: self.count, "batch": self.batch, "lr": self.lr}


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay to lr * min_lr_ratio."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return cfg.lr * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine)


def ema_decay(step: int, cfg: TrainConfig) -> float:
    """EMA decay warmed up so early averages are not dominated by the random init."""
    return min(cfg.ema_decay, (1.0 + step) / (10.0 + step))


def training_batch(
    images: np.ndarray,
    labels: np.ndarray,
    cfg: TrainConfig,
    step: int,
    null_class: int = NULL_CLASS,
    text: PromptTable | None = None,
):
    """One flow-matching batch, a pure function of (cfg.seed, step).

    images float32 [N,C,H,W] in [-1,1], labels int64 [N] ->
    x_t float32 [B,C,H,W], t float32 [B], y int64 [B] (null_class where dropped: the sample space's,
    NULL_CLASS in the legacy space), v float32 [B,C,H,W].
    With `text` (a text expert's prompts, row i for image i): y is float32 [B, width] instead, one of the
    image's prompt embeddings drawn per row, the empty prompt's where dropped (cfg.label_dropout).
    """
    rng = np.random.default_rng([cfg.seed, step])
    idx = rng.integers(0, len(images), size=cfg.batch)
    x1 = images[idx]
    x0 = rng.standard_normal(x1.shape, dtype=np.float32)
    t = rng.random(cfg.batch, dtype=np.float32)
    drop = rng.random(cfg.batch) < cfg.label_dropout
    if text is not None:
        y = text.pick(idx, drop, rng)  # drawn after the class path's draws: its batches are unchanged
    else:
        y = np.where(drop, null_class, labels[idx]).astype(np.int64)
    objective = cfg.objective_record()
    if not objective.is_identity:
        # the same draws, read by the objective: t is its uniform u, x0 its noise (workers/objectives.py);
        # the network's input, time input and target follow its parameterization and schedule
        from ddm.workers.objectives import training_example

        x_in, time_in, target = training_example(objective, x1, x0, t)
        return x_in, time_in, y, target
    return interpolate(x0, x1, t).astype(np.float32), t, y, target_velocity(x0, x1).astype(np.float32)


# batch(step) -> (x_t f32 [B,1,32,32], t f32 [B], y i64 [B], target v f32 [B,1,32,32]), pure in step
BatchFn = Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


class Trainer(Protocol):
    """What a framework provides to `train_loop`."""

    def resume(self, out_dir: Path) -> tuple[int, float]:
        """Load train state if out_dir has one; return (next step, wall seconds so far)."""

    def step(self, x_t, t, y, v, lr: float, ema: float) -> float:
        """One optimiser step on numpy inputs; returns the loss."""

    def save(self, out_dir: Path, step: int, wall_s: float) -> None:
        """Write weights (EMA) and the resumable train state, atomically."""


def _truncate_log(log_path: Path, last_step: int) -> None:
    """Drop log rows past the checkpoint we resume from (they will be trained and logged again)."""
    lines = log_path.read_text().splitlines(keepends=True)
    kept = lines[:1] + [
        ln for ln in lines[1:] if ln.split(",", 1)[0].isdigit() and int(ln.split(",", 1)[0]) <= last_step
    ]
    log_path.write_text("".join(kept))


def train_loop(
    trainer: Trainer,
    images: np.ndarray,
    labels: np.ndarray,
    cfg: TrainConfig,
    out_dir: Path,
    meta: dict,
    progress: bool = True,
    batch: BatchFn | None = None,
    text: PromptTable | None = None,
) -> dict:
    """Run (or resume) training to cfg.steps; checkpoint every cfg.save_every steps and at the end.

    `meta` is the framework/partition description; train_loop adds steps, wall time and loss and
    writes it to out_dir/meta.json next to the weights. Returns that final meta.
    `batch(step)` gives each step's batch (default: training_batch on images and labels, target
    x1 - x0); distillation (ddm.ops.distill) keeps its x_t, t, y and puts the teachers' velocity
    in as the target. It must be a pure function of the step, so a resumed run sees the same batches.
    `text`: a text expert's prompts (workers/text_conditions.py), row i for image i; its meta's card
    must declare that encoder (expert_meta's conditioning).
    """
    expert = kind_of(meta) == "expert"
    if batch is None:
        null_class = card_of(meta).sample_space.null_class if expert else NULL_CLASS
        batch = lambda step: training_batch(images, labels, cfg, step, null_class, text)  # noqa: E731
    if expert:
        _check_card(card_of(meta), cfg, text, len(images))
    out_dir.mkdir(parents=True, exist_ok=True)
    start, wall_before = trainer.resume(out_dir)
    if start >= cfg.steps:  # already trained this far: nothing to do, keep the stored meta
        return read_meta(out_dir, kind=kind_of(meta))
    log_path = out_dir / "loss.csv"
    new_log = start == 0 or not log_path.exists()
    if not new_log:
        _truncate_log(log_path, start)
    recent: list[float] = []
    t_start = time.perf_counter()

    def wall() -> float:
        return wall_before + time.perf_counter() - t_start

    def checkpoint(step: int) -> dict:
        trainer.save(out_dir, step, wall())
        final = {
            **meta,
            "train": cfg.to_dict(),
            "steps": step,
            "batch": cfg.batch,
            "wall_time_s": round(wall(), 1),
            "final_loss": float(np.mean(recent)) if recent else None,
            "num_train_samples": int(len(images)),
        }
        if expert:  # the card, up to date: steps, and the digest of the weights just written
            final = stamp_card(final, _weights_sha256(out_dir, final))
        write_meta(out_dir, final)
        return final

    final = {}
    with open(log_path, "w" if new_log else "a", newline="") as log_file:
        writer = csv.writer(log_file)
        if new_log:
            writer.writerow(["step", "loss", "lr", "wall_s"])
        bar = tqdm(
            range(start, cfg.steps), initial=start, total=cfg.steps, disable=not progress, desc="train"
        )
        for step in bar:
            x_t, t, y, v = batch(step)
            lr = learning_rate(step, cfg)
            loss = trainer.step(x_t, t, y, v, lr, ema_decay(step, cfg))
            if not math.isfinite(loss):
                raise ConfigError(expected("a finite training loss", f"{loss} at step {step}"))
            recent = (recent + [loss])[-100:]  # final_loss = mean of the last 100 steps
            writer.writerow([step + 1, f"{loss:.6f}", f"{lr:.3e}", f"{wall():.1f}"])
            bar.set_postfix(loss=f"{np.mean(recent):.4f}", lr=f"{lr:.1e}")
            if (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
                log_file.flush()
                checkpoint(step + 1)
        log_file.flush()
        final = checkpoint(cfg.steps)
    return final


def _check_card(card, cfg: TrainConfig, text: PromptTable | None, images: int) -> None:
    """The expert's card declares what this run trains: its objective, and for a text expert the encoder
    of its prompts (one prompt row per image); a class expert has no prompts."""
    if card.objective != cfg.objective_record():
        have, want = card.objective.describe(), cfg.objective_record().describe()
        raise ConfigError(expected(f"a meta whose card declares the objective trained ({want})", have))
    have = text.spec if text is not None else None
    want = card.conditioning.text if card.conditioning is not None else None
    if have != want:
        said = [s.to_dict() if s is not None else "class labels" for s in (have, want)]
        raise ConfigError(expected(f"prompts encoded by the card's text encoder ({said[1]})", said[0]))
    if text is not None and len(text) != images:
        raise ConfigError(expected(f"prompts for each of the {images} images", len(text)))


def _weights_sha256(out_dir: Path, meta: dict) -> str | None:
    """sha256 of the expert's weights file in out_dir (None when the trainer wrote none there)."""
    from ddm.schema.checkpoint_meta import file_sha256
    from ddm.workers.frameworks import expert_framework

    path = out_dir / expert_framework(meta["framework"]).weights_file
    return file_sha256(path) if path.is_file() else None


def model_config(tcfg: TrainConfig, architecture: str, space: SampleSpace = LEGACY, text_width: int = 0):
    """What a framework's trainer builds its model from (make_trainer's sizing): `architecture` at preset
    tcfg.preset, sized for `space`; text_width > 0: a text expert, the pooled prompt embedding in the
    class embedding's place."""
    from ddm.workers.architectures import expert_architecture

    config = expert_architecture(architecture).preset(tcfg.preset, space)
    return replace(config, text_width=text_width) if text_width else config


def make_trainer(
    framework: str, tcfg: TrainConfig, device: str = "cpu", architecture: str = "unet", **sizing
) -> Trainer:
    """The framework's trainer of `architecture` (ddm.workers.architectures) at preset tcfg.preset
    (device: torch only; JAX trains where JAX runs). sizing, the framework trainers' own arguments:
    space, the sample space it is sized for (default LEGACY), and text_width > 0 for a text expert
    reading pooled prompt embeddings of that width."""
    from ddm.workers.architectures import expert_architecture
    from ddm.workers.frameworks import expert_framework

    record = expert_framework(framework)
    expert_architecture(architecture, "--arch").code(framework)  # refused here, before any import
    return record.make_trainer(tcfg, device, architecture, **sizing)
