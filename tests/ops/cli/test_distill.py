"""`ddm distill` end to end on a tiny label split of real MNIST (random-weight torch teachers whose metas
name a real partition): the student, its one-expert deployment and card, resume, clear refusals, and
the student served through the pipeline (the real RabbitMQ and Redis) equal to the local sampler."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import numpy as np
import pytest

from ddm.ops.cli import main
from ddm.ops.random_experts import make_random_expert
from ddm.schema.checkpoint_meta import read_meta, write_meta
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from ddm.schema.partition import read_manifest
from ddm.workers import load_expert
from tests.support.data import SHARED, needs_shared_mnist
from tests.support.fakes import write_deployment, write_fake_deployment
from tests.support.harness import Pipeline, local_reference

SPLIT = "test[:100]"
TINY = ["--framework", "torch", "--preset", "tiny", "--batch", "4", "--no-progress"]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: usage errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def teachers(tmp_path_factory):
    """deployment.toml of two random torch experts (digits 0-4, 5-9) recorded as trained on the two
    clusters of a real label partition of MNIST test[:100]."""
    needs_shared_mnist()
    root = tmp_path_factory.mktemp("teachers")
    manifest_path = root / "p.json"
    argv = ["partition", "--dataset", "mnist", "--split", SPLIT, "--by", "labels:0-4,5-9"]
    assert run([*argv, "--data-dir", str(SHARED), "--out", str(manifest_path)])[0] == 0
    manifest = read_manifest(manifest_path)
    for k, labels in enumerate((range(0, 5), range(5, 10))):
        folder = make_random_expert(root / f"e{k}", "torch", labels, seed=k)
        meta = read_meta(folder)
        counts = list(manifest.clusters[k].label_counts)
        write_meta(folder, {**meta, "expert": k, "partition": manifest.identity(), "label_counts": counts})
    return write_deployment(root, ["e0", "e1"], "oracle", name="tiny-split", guidance=1.5), manifest


@pytest.fixture(scope="module")
def student(teachers, tmp_path_factory):
    deployment, _ = teachers
    out = tmp_path_factory.mktemp("student") / "s"
    code, stdout, stderr = run(
        ["distill", "--deployment", str(deployment), *TINY, "--steps", "2", "--save-every", "1"]
        + ["--data-dir", str(SHARED), "--out", str(out)]
    )
    assert code == 0, stderr
    return out, stdout


def test_distill_writes_a_student_expert_its_deployment_and_card(student, teachers):
    out, stdout = student
    deployment, manifest = teachers
    assert {"meta.json", "model.safetensors", "deployment.toml", "MODEL_CARD.md"} <= {
        p.name for p in out.iterdir()
    }
    meta = read_meta(out)
    assert meta["steps"] == 2 and meta["classes"] == list(range(10)) and meta["num_train_samples"] == 100
    # the union of the teachers' clusters: the whole split the partition names, checked by its hash
    assert (meta["partition"]["split"], meta["partition"]["data_sha256"]) == (SPLIT, manifest.data_sha256)
    assert meta["label_counts"] == [sum(c.label_counts[y] for c in manifest.clusters) for y in range(10)]
    record = meta["distilled_from"]
    assert (record["deployment"], record["strategy"], record["router_kind"]) == (
        "tiny-split",
        "oracle",
        "oracle",
    )
    assert [t["checkpoint"] for t in record["teachers"]] == [str(deployment.parent / f"e{k}") for k in (0, 1)]
    assert "distilled (`ddm distill`) from deployment `tiny-split`" in (out / "MODEL_CARD.md").read_text()
    alone = Deployment.load(out / "deployment.toml")
    assert [e.checkpoint for e in alone.experts] == [out.resolve()] and alone.guidance == 1.5
    assert f"ddm up --deployment {out / 'deployment.toml'}" in stdout
    v = load_expert(out, device="cpu").velocity(np.zeros((1, 1, 32, 32), np.float32), [0.5], [3])
    assert np.all(np.isfinite(v))


def test_resume_continues_and_refuses_what_does_not_match(student, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(student[0], out)
    deployment = json.loads((out / "meta.json").read_text())["distilled_from"]["deployment_path"]
    argv = ["distill", "--deployment", deployment, *TINY, "--data-dir", str(SHARED), "--out", str(out)]
    code, _, err = run([*argv, "--steps", "3"])
    assert code == 2 and "pass --resume" in err
    code, _, err = run([*argv, "--steps", "3", "--resume", "--strategy", "full"])
    assert code == 2 and "same strategy" in err
    code, _, err = run([*argv, "--steps", "3", "--resume"])
    assert code == 0, err
    assert read_meta(out)["steps"] == 3
    assert [int(r.split(",")[0]) for r in (out / "loss.csv").read_text().splitlines()[1:]] == [1, 2, 3]


def test_bad_flags_fail_clearly(teachers, tmp_path):
    deployment, manifest = teachers
    out = ["--out", str(tmp_path / "s")]
    code, _, err = run(["distill", "--deployment", str(deployment), "--framework", "tf", *out])
    assert code == 2 and "invalid choice: 'tf'" in err
    code, _, err = run(["distill", "--deployment", str(tmp_path / "none.toml"), "--framework", "jax", *out])
    assert code == 2 and "expected a deployment TOML file" in err and "not found" in err
    code, _, err = run(["distill", "--deployment", str(deployment), *TINY, "--strategy", "topk:3", *out])
    assert code == 2 and "--strategy: expected topk:K with K <= 2" in err
    # teachers whose metas name no partition: the data must be named
    fake = write_fake_deployment(tmp_path / "fake")
    code, _, err = run(["distill", "--deployment", str(fake), *TINY, *out])
    assert code == 2 and "pass --dataset and --split" in err
    # teachers recorded on other data than the split holds now
    wrong = {**manifest.identity(), "data_sha256": "0" * 64}
    for k in (0, 1):
        folder = tmp_path / "fake" / f"e{k}"
        write_meta(folder, {**read_meta(folder), "expert": k, "partition": wrong})
    code, _, err = run(["distill", "--deployment", str(fake), *TINY, "--data-dir", str(SHARED), *out])
    assert code == 2 and "data sha256 0000000000000000" in err
    assert not (tmp_path / "s").exists()  # refused before any training


def test_the_student_serves_through_the_pipeline(student, tmp_path):
    """The student's deployment on the real pipeline (expert worker + router) equals the local sampler."""
    served = student[0] / "deployment.toml"
    with Pipeline(served, tmp_path) as pipe:
        pipe.up({"s0": 0})
        spec = JobSpec.new([0, 5, 9], steps=4, seed=2)  # defaults: oracle, the teachers' guidance 1.5
        client = pipe.client()
        client.submit(spec)
        got = client.result(spec.job_id, timeout=120)
        assert np.abs(got - local_reference(served, spec)).max() <= 1e-4
        assert pipe.heartbeat("s0")["framework"] == "torch"
