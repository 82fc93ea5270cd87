"""`ddm resubmit` and `ddm logs` (issue 40 part 8): the same job again under a new id, with another seed if
asked; the log of this prefix's detached `ddm up`, or a clear error when there is none."""

from __future__ import annotations

import json

from ddm.client import Client
from ddm.ops.cli import main
from ddm.ops.up.detach import state_dir
from ddm.router.store import JobStore
from ddm.schema.messages import JobSpec
from tests.support.descriptors import demo_descriptor


def test_resubmit_queues_the_same_spec_under_a_new_id(env, capsys):
    spec = JobSpec.new([3, 8], steps=7, strategy="top1", seed=4, guidance=2.5)
    with Client(settings=env) as client:
        client.submit(spec, check=False)
        assert main(["resubmit", spec.job_id[:8]]) == 1, "checked like a submit: no router serves yet"
        assert "no router" in capsys.readouterr().err.lower()
        JobStore(client.redis, client.names, 600).publish_descriptor(demo_descriptor(), 60)
    assert main(["resubmit", spec.job_id[:8], "--seed", "9", "--queue-anyway", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    again = out["spec"]
    assert out["resubmits"] == spec.job_id and out["job_id"] != spec.job_id
    asked = (again["labels"], again["steps"], again["strategy"], again["guidance"], again["seed"])
    assert asked == ([3, 8], 7, "top1", 2.5, 9)


def test_resubmit_sends_an_old_jobs_k_as_null(env, capsys):
    """A job hash stored before null was the word carries K (10) for an unconditional image; K is refused
    now (issue 40 item 3), so resubmitting it sends null."""
    old = JobSpec("00112233445566778899aabbccddeeff", (3, 10), steps=5, strategy="full")
    with Client(settings=env) as client:
        fields = {"status": "done", "spec": old.to_json(), "step": "5", "steps": "5", "n": "2"}
        client.redis.hset(client.names.job(old.job_id), mapping=fields)
        JobStore(client.redis, client.names, 600).publish_descriptor(demo_descriptor("learned"), 60)
    assert main(["resubmit", old.job_id, "--queue-anyway", "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["spec"]["labels"] == [3, None]


def test_logs_prints_the_detached_log_or_says_there_is_none(env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["logs"]) == 1
    assert "no log of a detached `ddm up`" in capsys.readouterr().err
    log = state_dir(env.prefix, {"XDG_CACHE_HOME": str(tmp_path)}) / "up.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert main(["logs", "-n", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == ["line 97", "line 98", "line 99"]
