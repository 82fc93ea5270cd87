"""Distillation: train one dense student on a deployment's routed ensemble (the DDM paper distils its
ensemble into one model the same way).

The student sees the batches expert training sees (ddm.workers.training.training_batch: x_t = t x1 +
(1 - t) x0 with x1 real images, x0 ~ N(0, I), t ~ U[0, 1), labels dropped to the null class at the
same rate), but its regression target is the ensemble's velocity at (x_t, t, y) with guidance 1,
routed and mixed exactly as the sampler does (router/sampler.py: plan_step, then each chosen expert's
rows through Expert.velocity, then combine), instead of x1 - x0. Null-label rows are routed as the
router routes an unconditional image (the oracle reads labels, so under it they go by top1); the
student learns the ensemble's unconditional velocity there and so takes classifier-free guidance
like any expert. The training loop, EMA, optimiser,
checkpoints and resume are the experts' own (train_loop with a `batch` provider).

The student is a normal expert checkpoint (expert 0, classes = every label it saw) whose meta.json
adds a `distilled_from` record; `write_student_deployment` makes it a one-expert deployment.
`ddm distill --method reflow` (ddm.ops.reflow) makes a few-step student with the same pieces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.schema.checkpoint_meta import META_FILE
from ddm.schema.checkpoint_meta import read_meta as read_any_meta
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NULL_CLASS
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.schema.strategy import Strategy
from ddm.workers.architectures import model_title
from ddm.workers.checkpoint import expert_meta
from ddm.workers.training import BatchFn, TrainConfig, training_batch

DISTILLED_METHOD = "distilled"  # the student's partition "method": trained on the union, one cluster
STUDENT_DEPLOYMENT = "deployment.toml"  # written inside the student's folder, checkpoint = "."
# What must match between a distillation and the one it resumes (besides RESUME_KEYS).
DISTILL_RESUME_KEYS = ("method", "strategy", "router_kind", "teachers")


@dataclass(frozen=True)
class Ensemble:
    """A deployment's experts and routing policy as one velocity function at guidance 1.

    experts: {expert id: Expert} (load_experts); policy: RoutingPolicy (load_policy); strategy: the
    typed strategy, checked against the policy by the caller. Rows with a label are routed by
    `strategy`; null-label rows as the router routes an unconditional image (schema.descriptor): by
    `strategy` too, unless that is the oracle, which reads the label - then by the router's top1.
    """

    experts: Mapping[int, object]
    policy: object
    strategy: Strategy
    null_class: int = NULL_CLASS  # the deployment's sample space's (its class count)

    @property
    def null_strategy(self) -> Strategy:
        from ddm.schema.descriptor import UNCONDITIONAL_DEFAULT_STRATEGY

        if self.strategy.kind == "oracle":
            return Strategy.parse(UNCONDITIONAL_DEFAULT_STRATEGY)
        return self.strategy

    def velocity(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x f32 [B,C,H,W], t f32 [B] (one t per row), y i64 [B] -> v = sum_k w_k v_k, f32 [B,C,H,W]."""
        from ddm.router.sampler import combine, plan_step

        null = np.asarray(y) == self.null_class
        groups = [(self.strategy, np.flatnonzero(~null)), (self.null_strategy, np.flatnonzero(null))]
        if self.null_strategy == self.strategy:
            groups = [(self.strategy, np.arange(len(x)))]
        v = np.zeros_like(x, dtype=np.float32)
        for strategy, idx in groups:
            if not len(idx):
                continue
            xs, ts, ys = x[idx], t[idx], y[idx]
            # plan_step routes every row at its own t here: it fills its t rows with np.full, which
            # takes a [b] array as well as a scalar (a job's rows share one t per step; a batch's do not).
            plan = plan_step(self.policy, strategy, xs, ts, ys)
            ones = np.ones(len(idx), np.float32)  # guidance 1: the conditional (or null) velocity itself
            velocities = {
                k: self.experts[k].velocity(xs[rows], ts[rows], ys[rows], ones[rows])
                for k, rows in plan.rows.items()
            }
            v[idx] = combine(plan, velocities, len(idx))
        return v


def distill_batch(ensemble: Ensemble, images: np.ndarray, labels: np.ndarray, cfg: TrainConfig) -> BatchFn:
    """The train_loop batch provider: expert training's (x_t, t, y) for the step, with the ensemble's
    velocity as the target instead of x1 - x0. Pure in the step (the teachers are pure functions)."""

    def batch(step: int):
        x_t, t, y, _ = training_batch(images, labels, cfg, step)  # x1 - x0 is not the target here
        return x_t, t, y, ensemble.velocity(x_t, t, y)

    return batch


# -- what the student records ---------------------------------------------------------------------


def meta_digest(folder: Path) -> str:
    """sha256 of a checkpoint's meta.json bytes: names the exact teacher (its training run)."""
    return hashlib.sha256((Path(folder) / META_FILE).read_bytes()).hexdigest()


def teachers_record(deployment) -> list[dict]:
    """[{id, checkpoint, framework, preset, meta_sha256}] of a Deployment's experts."""
    out = []
    for entry in deployment.experts:
        meta = read_any_meta(entry.checkpoint, kind="expert")
        out.append(
            {
                "id": entry.id,
                "checkpoint": str(entry.checkpoint),
                "framework": meta["framework"],
                "preset": meta.get("preset"),
                "meta_sha256": meta_digest(entry.checkpoint),
            }
        )
    return out


def distilled_from(deployment, strategy: str, steps: int) -> dict:
    """The `distilled_from` record of a student's meta.json."""
    return {
        "deployment": deployment.name,
        "deployment_path": str(deployment.path),
        "router_kind": deployment.router.kind,
        "strategy": strategy,
        "guidance": 1.0,
        "teachers": teachers_record(deployment),
        "steps": int(steps),
    }


def student_meta(
    framework: str,
    preset: str,
    data: dict,
    labels: np.ndarray,
    record: dict,
    device: str,
    architecture: str = "unet",
    sample_space: SampleSpace = LEGACY,
) -> dict:
    """A student's meta before training adds its numbers: a normal expert record (expert 0, classes and
    label_counts of the data it saw) with `distilled_from`, in its teachers' sample space. data:
    {dataset, split, data_sha256}."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=sample_space.num_classes).tolist()
    # not a cluster of a manifest: the data the student saw, as a one-cluster "partition"
    partition = {"id": DISTILLED_METHOD, **data, "method": DISTILLED_METHOD, "num_clusters": 1}
    return expert_meta(
        framework,
        preset,
        0,
        partition,
        counts,
        device,
        architecture=architecture,
        sample_space=sample_space,
        distilled_from=record,
    )


def check_distill_resume(out: Path, meta: dict) -> None:
    """On --resume, the run in `out` must distil the same teachers (by meta digest) the same way."""
    if not (Path(out) / META_FILE).is_file():
        return
    old = read_any_meta(out, kind="expert").get("distilled_from")
    if not isinstance(old, dict):
        raise ConfigError(expected(f"a distillation run in {out} to resume", "an expert trained on data"))
    new = meta["distilled_from"]
    for key in DISTILL_RESUME_KEYS:
        if key == "teachers":
            a = [(x["id"], x["meta_sha256"]) for x in old.get(key, [])]
            b = [(x["id"], x["meta_sha256"]) for x in new[key]]
        else:
            a, b = old.get(key), new.get(key)
        if a != b:
            raise ConfigError(expected(f"--resume with the same {key} as {out}", f"{b} vs {a}"))


# -- where the student's data comes from ----------------------------------------------------------


def teachers_data(deployment, whole: bool = True) -> dict:
    """{dataset, split, data_sha256} of the partition the teachers were trained on, from their metas.
    whole: also check that they cover all its clusters, so the union of their data is the whole split.
    ConfigError (saying to pass --dataset and --split) when the metas do not say that."""
    metas = [read_any_meta(e.checkpoint, kind="expert") for e in deployment.experts]
    parts = [m.get("partition") for m in metas]
    hint = "; pass --dataset and --split to distil on a split of your choice"
    if not all(isinstance(p, dict) for p in parts) or any(
        k not in parts[0] for k in ("dataset", "split", "num_clusters")
    ):
        raise ConfigError(
            expected(
                "teachers whose meta.json names their partition (dataset, split, num_clusters)", parts[0]
            )
            + hint
        )
    if any(p != parts[0] for p in parts):
        ids = sorted({str(p.get("id")) for p in parts})
        raise ConfigError(expected("teachers trained on one partition", f"partitions {ids}") + hint)
    clusters = sorted(int(m.get("expert", -1)) for m in metas)
    if whole and clusters != list(range(int(parts[0]["num_clusters"]))):
        raise ConfigError(
            expected(
                f"teachers covering every cluster 0..{parts[0]['num_clusters'] - 1} of partition "
                f"{parts[0].get('id')}",
                clusters,
            )
            + hint
        )
    return {
        "dataset": parts[0]["dataset"],
        "split": parts[0]["split"],
        "data_sha256": parts[0].get("data_sha256"),
    }


def check_data(dataset, want_sha256: str | None) -> None:
    """Refuse data other than what the teachers' partition was made from (when it recorded a hash)."""
    if want_sha256 and dataset.sha256 != want_sha256:
        want = f"data sha256 {want_sha256[:16]}... (the teachers' partition)"
        raise ConfigError(f"{dataset.name} {dataset.split}: {expected(want, dataset.sha256[:16] + '...')}")


# -- serving the student ---------------------------------------------------------------------------


def write_student_deployment(
    student: Path, teacher_deployment, guidance: float | None = None, sampling: dict | None = None
) -> Path | None:
    """student/deployment.toml: the student alone (checkpoint = ".", this folder), oracle routing (one
    expert holding every label), the teachers' default guidance (or `guidance`: a reflow student is
    served at 1), class names and expert-loss policy, so it evaluates like for like; `sampling`: its
    [sampling] table. None (nothing written) if the student lacks some label: no router routes a label
    no expert has."""
    meta = read_any_meta(student, kind="expert")
    d = teacher_deployment
    if sorted(meta.get("classes", [])) != list(range(d.sample_space.num_classes)):
        return None
    student_deployment = Deployment.build(
        Path(student) / STUDENT_DEPLOYMENT,
        ["."],
        "oracle",
        name=f"{d.name}-student",
        guidance=d.guidance if guidance is None else guidance,
        class_names=list(d.class_names),
        on_expert_loss=d.on_expert_loss,
        **({"sampling": sampling} if sampling else {}),
        **({"sample_space": d.sample_space} if d.sample_space != LEGACY else {}),
    )
    path = student_deployment.write(comment=f"The student of `ddm distill` alone; distilled from {d.path}")
    return path


def student_summary(meta: dict) -> str:
    """One paragraph on a student for its model card (ops/study/model_card.py)."""
    src = meta["distilled_from"]
    part = meta.get("partition", {})
    teachers = ", ".join(f"{t['id']}: {t['framework']} {t['preset']}" for t in src.get("teachers", []))
    if src.get("method") == "reflow":
        pairs, how = src.get("pairs", {}), src.get("sampling", {})
        return (
            f"A {meta.get('preset')} {model_title(meta)} few-step student (`ddm distill --method reflow`, "
            f"rectified flow) of deployment `{src.get('deployment')}` ({src.get('router_kind')} router, "
            f"strategy `{src.get('strategy')}`; teachers {teachers}): trained on x_t between "
            f"{pairs.get('n')} (noise, image) pairs the ensemble sampled ({pairs.get('solver')}, "
            f"{pairs.get('steps')} steps, "
            f"grid {pairs.get('grid')}, guidance {pairs.get('guidance')}), target x1 - x0"
            f"{', initialised from ' + src['init_from'] if src.get('init_from') else ''}. "
            f"Samples with {how.get('solver')} on the {how.get('grid')} grid in {how.get('steps')} steps "
            f"(default {how.get('default_steps')}) at guidance {how.get('guidance')}: the pairs' guidance is "
            f"in its flow. Pairs cost {pairs.get('cost')}; training {src.get('training_cost')}."
        )
    return (
        f"A {meta.get('preset')} {model_title(meta)} flow-matching student distilled (`ddm distill`) from "
        f"deployment `{src.get('deployment')}` ({src.get('router_kind')} router, strategy "
        f"`{src.get('strategy')}`, guidance 1; teachers {teachers}): trained on the routed ensemble's "
        f"velocity at x_t of {part.get('dataset')} `{part.get('split')}`, classes {meta.get('classes')}."
    )
