"""Distillation (ddm.ops.distill): the target is the routed ensemble's velocity, the student trains in
both frameworks through the experts' own loop, loads through load_expert, serves alone, and resumes.

Teachers are fakes with a velocity known by hand (the routing tests) or the random-weight tiny
label-split deployment of tests/conftest.py (training); a few steps at batch 4 on synthetic images.
"""

from __future__ import annotations

import numpy as np
import pytest

from ddm.ops.distill import (
    Ensemble,
    check_distill_resume,
    distill_batch,
    distilled_from,
    student_meta,
    teachers_data,
    write_student_deployment,
)
from ddm.router.deployment_loader import describe, load_experts, load_policy
from ddm.router.policies import RoutingPolicy, build_policy
from ddm.router.sampler import sample_local
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from ddm.schema.flow import NULL_CLASS
from ddm.schema.messages import JobSpec
from ddm.schema.strategy import Strategy
from ddm.workers import checkpoint as ckpt
from ddm.workers import load_expert
from ddm.workers.torch_expert import checkpoint as torch_checkpoint
from ddm.workers.training import TrainConfig, make_trainer, train_loop, training_batch

TCFG = TrainConfig(preset="tiny", steps=4, batch=4, warmup=2, save_every=2, seed=0)
DATA = {"dataset": "synthetic", "split": "none", "data_sha256": None}


def synthetic(n: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 1, 32, 32)).astype(np.float32), (np.arange(n) % 10).astype(np.int64)


class FakeExpert:
    """v_k(x, t, y) = (k + 1) x + t + y / 100: distinct per expert, row and label; records guidance."""

    def __init__(self, k: int):
        self.k, self.guidance = k, []

    def velocity(self, x, t, y, guidance=1.0):
        self.guidance.append(np.asarray(guidance))
        return self.v(x, t, y)

    def v(self, x, t, y):
        return ((self.k + 1) * x + t[:, None, None, None] + y[:, None, None, None] / 100).astype(np.float32)


def counts(*label_sets) -> np.ndarray:
    """int [K, 10]: 100 images of each label of each set."""
    return np.asarray([[100 if c in s else 0 for c in range(10)] for s in label_sets])


# Hand-written weights w(y) [2] per label 0..9 and null (NULL_CLASS = 10), per (router, strategy).
# label-prior over experts on 0-6 and 3-9: p(k | y) = 1/0, 1/2-1/2, 0/1; null = cluster sizes (equal).
SHARED = counts(range(0, 7), range(3, 10))
PRIOR_FULL = [[1, 0]] * 3 + [[0.5, 0.5]] * 4 + [[0, 1]] * 3 + [[0.5, 0.5]]
PRIOR_TOP1 = [[1, 0]] * 7 + [[0, 1]] * 3 + [[1, 0]]  # ties go to the lower expert id
# oracle over 0-4 / 5-9 (the second cluster twice as large): labels name the expert; a null label
# names none, so it is routed by top1 of the table's null row: the largest cluster.
SPLIT = np.asarray([[100] * 5 + [0] * 5, [0] * 5 + [200] * 5])
ORACLE = [[1, 0]] * 5 + [[0, 1]] * 5 + [[0, 1]]
CASES = {
    "label-prior full": ("label-prior", SHARED, "full", PRIOR_FULL),
    "label-prior top1": ("label-prior", SHARED, "top1", PRIOR_TOP1),
    "oracle": ("oracle", SPLIT, "oracle", ORACLE),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_target_is_the_routed_mixture_of_the_teachers(case):
    kind, label_counts, strategy, table = CASES[case]
    experts = {0: FakeExpert(0), 1: FakeExpert(1)}
    ensemble = Ensemble(experts, build_policy(kind, label_counts), Strategy.parse(strategy))
    images, labels = synthetic()
    cfg = TrainConfig(preset="tiny", batch=48, label_dropout=0.3, seed=4)
    x_t, t, y, v = distill_batch(ensemble, images, labels, cfg)(7)

    want_x, want_t, want_y, flow_target = training_batch(images, labels, cfg, 7)
    assert set(np.unique(y)) == set(range(11))  # every label and the null class: all cases are exercised
    np.testing.assert_array_equal(x_t, want_x)
    np.testing.assert_array_equal(t, want_t)
    np.testing.assert_array_equal(y, want_y)
    w = np.asarray(table, np.float32)[y]  # [B, 2]
    want = sum(w[:, k, None, None, None] * experts[k].v(x_t, t, y) for k in (0, 1))
    np.testing.assert_allclose(v, want, rtol=1e-6, atol=1e-6)
    assert v.dtype == np.float32 and v.shape == x_t.shape
    assert not np.allclose(v, flow_target)  # not x1 - x0
    assert all(np.all(g == 1.0) for e in experts.values() for g in e.guidance)  # guidance 1


class TimeRouter:
    """p(k | x_t, t, y) = [t, 1 - t]: a router whose answer depends on each row's own t."""

    num_experts = 2

    def probs(self, x, t, y):
        t = np.asarray(t, np.float32)
        return np.stack([t, 1 - t], axis=1)


def test_each_row_is_routed_at_its_own_t():
    experts = {0: FakeExpert(0), 1: FakeExpert(1)}
    ensemble = Ensemble(experts, RoutingPolicy(router=TimeRouter()), Strategy("full"))
    images, labels = synthetic()
    x_t, t, y, v = distill_batch(ensemble, images, labels, TrainConfig(preset="tiny", batch=16))(0)
    assert len(np.unique(t)) == len(t)
    want = t[:, None, None, None] * experts[0].v(x_t, t, y) + (1 - t[:, None, None, None]) * experts[1].v(
        x_t, t, y
    )
    np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-5)


def test_oracle_ensemble_routes_a_null_row_by_the_router_not_the_label_table():
    ensemble = Ensemble(
        {0: FakeExpert(0), 1: FakeExpert(1)}, build_policy("oracle", SPLIT), Strategy("oracle")
    )
    assert str(ensemble.null_strategy) == "top1"
    full = Ensemble(ensemble.experts, ensemble.policy, Strategy("full"))
    assert full.null_strategy == Strategy("full")


# -- a real student --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teachers(label_split_deployment):
    """The tiny label split (torch 0-4, jax 5-9, random weights) as an oracle-routed ensemble."""
    deployment = Deployment.load(label_split_deployment)
    policy = load_policy(deployment)
    return deployment, Ensemble(load_experts(deployment, device="cpu"), policy, Strategy("oracle"))


def distil(framework: str, out, teachers, trainer=None, cfg: TrainConfig = TCFG) -> dict:
    deployment, ensemble = teachers
    images, labels = synthetic()
    meta = student_meta(
        framework, "tiny", DATA, labels, distilled_from(deployment, "oracle", cfg.steps), "cpu"
    )
    trainer = trainer or make_trainer(framework, cfg)
    batch = distill_batch(ensemble, images, labels, cfg)
    return train_loop(trainer, images, labels, cfg, out, meta, progress=False, batch=batch)


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_student_is_an_expert_checkpoint_that_serves_alone(framework, teachers, tmp_path):
    final = distil(framework, tmp_path, teachers)
    meta = ckpt.read_meta(tmp_path)
    assert meta["steps"] == TCFG.steps and meta["classes"] == list(range(10))
    assert np.isfinite(final["final_loss"])
    record = meta["distilled_from"]
    assert record["strategy"] == "oracle" and record["guidance"] == 1.0
    assert [(x["id"], x["framework"]) for x in record["teachers"]] == [(0, "torch"), (1, "jax")]
    assert all(len(x["meta_sha256"]) == 64 for x in record["teachers"])

    student = load_expert(tmp_path, device="cpu")
    v = student.velocity(
        np.zeros((2, 1, 32, 32), np.float32), np.array([0.2, 0.7], np.float32), np.array([3, 8])
    )
    assert v.shape == (2, 1, 32, 32) and np.all(np.isfinite(v))
    assert student.meta.framework == framework and student.meta.classes == tuple(range(10))

    # alone, as the one-expert deployment `ddm distill` writes next to it
    path = write_student_deployment(tmp_path, teachers[0])
    alone = Deployment.load(path)
    assert [e.checkpoint for e in alone.experts] == [tmp_path.resolve()]
    policy = load_policy(alone)
    job = describe(alone, policy, "test").resolve(JobSpec.new([1, 7], steps=2, seed=1))
    assert str(job.strategy) == "oracle" and job.guidance == teachers[0].guidance
    x = sample_local({0: student.velocity}, policy, job)
    assert x.shape == (2, 1, 32, 32) and np.all(np.isfinite(x))


class Recording:
    """Wraps a trainer: records the target of every step; step `crash_at` (0-based) raises."""

    def __init__(self, inner, crash_at: int | None = None):
        self.inner, self.crash_at, self.targets = inner, crash_at, []

    def resume(self, out_dir):
        return self.inner.resume(out_dir)

    def save(self, out_dir, step, wall_s):
        self.inner.save(out_dir, step, wall_s)

    def step(self, x_t, t, y, v, lr, ema):
        if len(self.targets) == self.crash_at:
            raise KeyboardInterrupt  # as a killed run stops
        self.targets.append(v)
        return self.inner.step(x_t, t, y, v, lr, ema)


def test_training_regresses_the_ensemble_and_resumes_to_the_same_weights(teachers, tmp_path):
    _, ensemble = teachers
    straight = Recording(make_trainer("torch", TCFG))
    distil("torch", tmp_path / "a", teachers, trainer=straight)
    images, labels = synthetic()
    x_t, t, y, flow_target = training_batch(images, labels, TCFG, 0)
    np.testing.assert_array_equal(straight.targets[0], ensemble.velocity(x_t, t, y))
    assert not np.allclose(straight.targets[0], flow_target)

    with pytest.raises(KeyboardInterrupt):
        distil("torch", tmp_path / "b", teachers, trainer=Recording(make_trainer("torch", TCFG), crash_at=3))
    assert ckpt.read_meta(tmp_path / "b")["steps"] == 2
    resumed = Recording(make_trainer("torch", TCFG))
    distil("torch", tmp_path / "b", teachers, trainer=resumed)
    assert len(resumed.targets) == 2  # steps 3 and 4 only, on the same batches as the straight run
    for got, want in zip(resumed.targets, straight.targets[2:], strict=True):
        np.testing.assert_array_equal(got, want)
    a, b = (torch_checkpoint.load_weights(tmp_path / d) for d in ("a", "b"))
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=0, atol=1e-6, err_msg=name)


def test_resume_refuses_other_teachers_or_strategy(teachers, tmp_path):
    deployment, _ = teachers
    _, labels = synthetic()
    meta = student_meta("torch", "tiny", DATA, labels, distilled_from(deployment, "oracle", 4), "cpu")
    write_meta(tmp_path, meta)
    check_distill_resume(tmp_path, meta)  # the same: fine
    other = {**meta, "distilled_from": {**meta["distilled_from"], "strategy": "full"}}
    with pytest.raises(ConfigError, match="same strategy"):
        check_distill_resume(tmp_path, other)
    teachers_changed = [{**x, "meta_sha256": "0" * 64} for x in meta["distilled_from"]["teachers"]]
    other = {**meta, "distilled_from": {**meta["distilled_from"], "teachers": teachers_changed}}
    with pytest.raises(ConfigError, match="same teachers"):
        check_distill_resume(tmp_path, other)


def test_teachers_without_a_partition_record_need_dataset_and_split(teachers):
    with pytest.raises(ConfigError, match="--dataset and --split"):
        teachers_data(teachers[0])  # random experts: partition {"id": "test", ...}, no num_clusters


def test_null_class_is_trained(teachers):
    """Label dropout reaches the student's batches as in expert training (so it takes guidance)."""
    _, ensemble = teachers
    images, labels = synthetic()
    cfg = TrainConfig(preset="tiny", batch=64, seed=1)
    _, _, y, _ = distill_batch(ensemble, images, labels, cfg)(0)
    assert 0 < np.count_nonzero(y == NULL_CLASS) < len(y)
