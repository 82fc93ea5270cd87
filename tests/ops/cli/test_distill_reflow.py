"""`ddm distill --method reflow` on random tiny experts (no data needed): pairs cached by chunk and
resumed, other pair settings refused, the student's meta (method, pairs, cost, sampling), its one-expert
deployment (guidance 1, a few-step [sampling] offer) loadable, and the student sampling through
sample_local at 1, 2 and 4 steps."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from ddm.ops import reflow as r
from ddm.ops.cli import main
from ddm.ops.random_experts import make_random_expert
from ddm.router.deployment_loader import load_experts, load_policy
from ddm.router.sampler import initial_noise, sample_local
from ddm.schema.checkpoint_meta import read_meta
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from tests.support.fakes import write_deployment

TINY = ["--framework", "torch", "--preset", "tiny", "--batch", "4", "--no-progress"]
PAIRS = ["--method", "reflow", "--pairs", "70", "--pair-steps", "2", "--pair-guidance", "1.5"]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def teachers(tmp_path_factory):
    root = tmp_path_factory.mktemp("teachers")
    for k, labels in enumerate((range(0, 5), range(5, 10))):
        make_random_expert(root / f"e{k}", "torch", labels, seed=k)
    return write_deployment(root, ["e0", "e1"], "oracle", name="tiny", guidance=2.0)


@pytest.fixture(scope="module")
def student(teachers, tmp_path_factory):
    out = tmp_path_factory.mktemp("student") / "s"
    argv = ["distill", "--deployment", str(teachers), *TINY, *PAIRS, "--steps", "2", "--save-every", "1"]
    code, stdout, stderr = run([*argv, "--out", str(out)])
    assert code == 0, stderr
    return out, argv


def test_pairs_are_the_ensembles_samples_cached_by_chunk(student, teachers):
    out, _ = student
    pairs = out.with_name("s.pairs")
    assert sorted(p.name for p in pairs.glob("chunk_*.npz")) == ["chunk_00000.npz", "chunk_00001.npz"]
    x0, x1, y = r.load_pairs(pairs, 70)
    assert x0.shape == x1.shape == (70, 1, 32, 32) and y.tolist() == [i % 10 for i in range(70)]
    # chunk 1 is the job of seed 0 + 1: its noise and the ensemble's image under the pair settings
    deployment = Deployment.load(teachers)
    spec = JobSpec.new(y[64:].tolist(), steps=2, strategy="oracle", guidance=1.5, seed=1)
    np.testing.assert_array_equal(x0[64:], initial_noise(spec))
    experts = {k: e.velocity for k, e in load_experts(deployment).items()}
    want = sample_local(experts, load_policy(deployment), ResolvedJob.of(spec))
    np.testing.assert_allclose(x1[64:], want, atol=1e-5)


def test_the_student_records_how_it_was_made_and_how_it_samples(student):
    out, _ = student
    meta = read_meta(out)
    src = meta["distilled_from"]
    assert src["method"] == "reflow" and src["guidance"] == 1.0
    assert src["pairs"]["n"] == 70 and src["pairs"]["steps"] == 2 and src["pairs"]["guidance"] == 1.5
    assert src["pairs"]["cost"]["wall_s"] >= 0 and len(src["pairs"]["sha256"]) == 64
    assert src["sampling"]["solver"] == "euler" and src["sampling"]["default_steps"] == 4
    assert src["training_cost"]["steps"] == 2 and src["training_cost"]["cpu_s"] >= 0
    assert meta["classes"] == list(range(10)) and meta["num_train_samples"] == 70
    assert meta["train"]["label_dropout"] == 0.0  # reflow_batch drops no labels, and says so
    assert "reflow" in (out / "MODEL_CARD.md").read_text()


def test_the_students_deployment_loads_and_samples_in_1_to_4_steps(student):
    out, _ = student
    deployment = Deployment.load(out / "deployment.toml")
    assert deployment.num_experts == 1 and deployment.guidance == 1.0
    assert deployment.sampling.default_solver == "euler" and "midpoint" in deployment.sampling.solvers
    experts = {k: e.velocity for k, e in load_experts(deployment).items()}
    policy = load_policy(deployment)
    for steps in (1, 2, 4):
        spec = JobSpec.new([3, 7], steps=steps, strategy="oracle", guidance=1.0, seed=5)
        x = sample_local(experts, policy, ResolvedJob.of(spec))
        assert x.shape == (2, 1, 32, 32) and np.isfinite(x).all()


def test_resume_resamples_only_missing_chunks_and_refuses_other_settings(student, tmp_path):
    out, argv = student
    pairs = out.with_name("s.pairs")
    before = r.load_pairs(pairs, 70)
    (pairs / "chunk_00001.npz").unlink()
    code, _, stderr = run([*argv, "--out", str(out), "--resume"])
    assert code == 0, stderr
    for a, b in zip(before, r.load_pairs(pairs, 70), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    code, _, stderr = run([*argv, "--pair-steps", "3", "--out", str(out), "--resume"])
    assert code != 0 and "settings" in stderr


def test_a_reflow_student_in_an_rgb_space_is_sized_and_served_in_it(tmp_path):
    """The pairs, the student's model and card and its deployment follow the teachers' sample space."""
    from ddm.schema.sample_space import SampleSpace
    from tests.support.fakes import write_random_deployment

    rgb = SampleSpace((3, 16, 16), (-1.0, 1.0), 3, ("red", "green", "blue"))
    experts = [("a", "torch", range(0, 2), 0), ("b", "jax", range(1, 3), 1)]
    teachers = write_random_deployment(tmp_path / "t", experts, router="label-prior", sample_space=rgb)
    out = tmp_path / "s"
    argv = ["distill", "--deployment", str(teachers), *TINY, "--method", "reflow", "--pairs", "6"]
    code, _, stderr = run([*argv, "--pair-steps", "2", "--steps", "1", "--out", str(out)])
    assert code == 0, stderr
    x0, x1, y = r.load_pairs(out.with_name("s.pairs"), 6)
    assert x0.shape == x1.shape == (6, 3, 16, 16) and y.tolist() == [0, 1, 2, 0, 1, 2]
    meta = read_meta(out)
    assert (meta["config"]["in_channels"], meta["config"]["image_size"], meta["config"]["num_classes"]) == (
        3,
        16,
        3,
    )
    served = Deployment.load(out / "deployment.toml")
    assert served.sample_space == rgb
    spec = JobSpec.new([0, 2], steps=2, strategy="oracle", guidance=1.0, seed=1)
    velocities = {k: e.velocity for k, e in load_experts(served).items()}
    x = sample_local(velocities, load_policy(served), ResolvedJob.of(spec, rgb))
    assert x.shape == (2, 3, 16, 16) and np.isfinite(x).all()
