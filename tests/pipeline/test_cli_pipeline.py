"""The user's surface on a real pipeline (random-weight experts in PyTorch and JAX, a router, RabbitMQ
and Redis): the example script, Client.generate, cancelling a running job (`ddm cancel` while `ddm
submit --wait` follows it), `ddm result` and `ddm workers`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ddm.ops.cli import main
from ddm.schema.messages import JobSpec, JobStatus
from tests.support.harness import DDM_CLI, Pipeline, wait_for_step
from tests.support.services import amqp_channel, rabbitmqctl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "follow_job.py"


@pytest.fixture(scope="module")
def pipe(label_split_deployment, tmp_path_factory):
    with Pipeline(label_split_deployment, tmp_path_factory.mktemp("logs")) as p:
        yield p.up({"e0": 0, "e1": 1})


@pytest.fixture
def cli_env(pipe, monkeypatch):
    """`main([...])` in this process talks to the pipeline."""
    for var in ("DDM_PREFIX", "DDM_AMQP_URL", "DDM_REDIS_URL"):
        monkeypatch.setenv(var, pipe.env[var])


def test_the_example_submits_follows_and_saves_a_png(pipe, tmp_path):
    out = tmp_path / "digits.png"
    argv = [sys.executable, str(EXAMPLE), "--labels", "3,8", "--n", "2", "--steps", "4", "--out", str(out)]
    done = subprocess.run(argv, env=pipe.env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("step ")] == ["1/4", "2/4", "3/4", "4/4"]
    assert "done: strategy oracle" in lines[-1]  # the deployment's default, resolved by the router
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_example_reads_null_and_names_a_bad_label(pipe, tmp_path):
    """`--labels 3,null` tracebacked (issue 40 part 7): null is an unconditional image (which this
    oracle-routed deployment refuses, saying why), and a bad item is named, as `ddm submit` does."""
    out = tmp_path / "mixed.png"
    argv = [sys.executable, str(EXAMPLE), "--steps", "2", "--out", str(out)]
    done = subprocess.run(
        [*argv, "--labels", "3,null"], env=pipe.env, cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "unconditional images need a router that reads x_t" in done.stderr
    bad = subprocess.run(
        [*argv, "--labels", "3,x"], env=pipe.env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "got 'x'" in bad.stderr and "Traceback" not in bad.stderr


def test_generate_returns_the_images_in_one_call(pipe):
    with pipe.client() as client:
        x = client.generate([2, 7], n=2, steps=3, timeout=120)
    assert x.shape == (4, 1, 32, 32) and x.dtype == np.float32 and np.isfinite(x).all()


def test_cancel_stops_a_running_job_and_submit_wait_exits_1(pipe, cli_env, capsys, tmp_path):
    err = tmp_path / "submit.err"  # a file, not a pipe: its progress bar never blocks it
    submit = subprocess.Popen(
        [*DDM_CLI, "submit", "--label", "3", "--n", "1", "--steps", "1000", "--wait"],
        env=pipe.env,
        stdout=subprocess.PIPE,
        stderr=err.open("w"),
        text=True,
    )
    try:
        job_id = submit.stdout.readline().strip()
        with pipe.client() as client:
            wait_for_step(client, job_id, 2)
            assert main(["cancel", job_id, "--wait", "--timeout", "60", "--json"]) == 0
            st = json.loads(capsys.readouterr().out)
            assert st["status"] == "cancelled" and 2 <= st["step"] < 1000
            assert submit.wait(timeout=60) == 1
            assert f"job {job_id} was cancelled" in err.read_text()
            frames = list(client.frames(job_id, follow=False))
            assert [f.step for f in frames] == list(range(1, st["step"] + 1)), "its frames are kept"
            time.sleep(1.0)  # replies still in flight for it land and are dropped
            assert client.status(job_id).step == st["step"], "no step after the cancel"
            assert main(["result", job_id]) == 1
            assert f"job {job_id} was cancelled" in capsys.readouterr().err
            assert main(["cancel", job_id]) == 0  # ended: nothing to do, said so
            assert "cancelled at step" in capsys.readouterr().out
    finally:
        submit.kill()
        submit.wait()
    with amqp_channel() as ch:  # not requeued
        assert ch.queue_declare(pipe.names.jobs, passive=True).method.message_count == 0
    assert unacked(pipe.names.jobs) == 0, "the router acked the job message"


def unacked(queue: str) -> int:
    """Messages of `queue` delivered and not acked yet, as the broker counts them (rabbitmqctl)."""
    listing = rabbitmqctl("list_queues", "name", "messages_unacknowledged").stdout
    counts = dict(line.split("\t") for line in listing.splitlines() if "\t" in line)
    return int(counts[queue])


def test_result_of_an_earlier_job(pipe, cli_env, capsys, tmp_path):
    with pipe.client() as client:
        job_id = client.submit(JobSpec.new([1, 6], steps=3))
        x = client.result(job_id, timeout=120)
    argv = ["result", job_id, "--out", str(tmp_path / "r.png"), "--npy", str(tmp_path / "r.npy"), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["shape"]) == (JobStatus.DONE.value, [2, 1, 32, 32])
    assert report["saved"] == {"png": str(tmp_path / "r.png"), "npy": str(tmp_path / "r.npy")}
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), x)
    assert main(["result", job_id]) == 0
    assert f"job {job_id} done: 2 images (labels 1,6)" in capsys.readouterr().out
    assert main(["result", "no-such-job"]) == 1


def test_workers_lists_the_live_workers_with_queue_depths(pipe, cli_env, capsys):
    assert main(["workers", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    workers = {w["worker_id"]: w for w in report["workers"]}
    assert set(workers) == {"e0", "e1", "router"} and report["errors"] == []
    assert (workers["e0"]["framework"], workers["e1"]["framework"]) == ("torch", "jax")
    assert workers["e1"]["queue"] == pipe.names.expert_queue(1)
    assert workers["router"]["queue"] == pipe.names.jobs
    assert all(isinstance(w["queue_depth"], int) and w["queue_consumers"] >= 1 for w in workers.values())
    assert main(["workers"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "WORKER",
        "ROLE",
        "EXPERT",
        "FRAMEWORK",
        "DEVICE",
        "MEMORY",
        "HOST",
        "QUEUE",
        "DEPTH",
        "WORK",
        "SEEN",
    ]
    assert table[1].split()[:2] == ["router", "router"] and len(table) == 4
    # each expert's weights as held (the test experts: float32 UNets) and its process's resident set
    for worker_id in ("e0", "e1"):
        held = workers[worker_id]["weights_bytes"]
        assert 100_000 < held < 100_000_000 and workers[worker_id]["rss_bytes"] > held
    assert "GB weights" in table[2] and "GB rss" in table[2]
