"""`ddm cleanup --prefix P` on the real broker and Redis: asks first (refuses without a terminal unless
--yes), shows what it would delete with --dry-run, refuses while workers consume, then deletes exactly
the prefix's queues, exchange and keys, and says so in --json; another prefix is untouched."""

from __future__ import annotations

import json
import subprocess

import pika.exceptions
import pytest

from ddm.runtime.amqp import declare_topology
from ddm.schema.messages import JobSpec
from ddm.schema.names import Names
from tests.support.harness import DDM_CLI, service_env
from tests.support.services import amqp_channel, cleanup_prefix, new_prefix


def cleanup(prefix: str, *args: str) -> subprocess.CompletedProcess:
    argv = [*DDM_CLI, "cleanup", "--prefix", prefix, "--max-experts", "4", *args]
    env = service_env(prefix)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def queue_exists(name: str) -> bool:
    with amqp_channel() as ch:
        try:
            ch.queue_declare(name, passive=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            assert exc.reply_code == 404
            return False
    return True


@pytest.fixture
def other_prefix():
    prefix = new_prefix()
    yield prefix
    cleanup_prefix(prefix)


def test_cleanup_deletes_one_prefix_after_asking(settings, other_prefix):
    from ddm.client.client import Client

    names, other = settings.names, Names(other_prefix)
    with amqp_channel() as ch:
        declare_topology(ch, names, [0, 1], queue_type="classic")
        declare_topology(ch, other, [0], queue_type="classic")
    with Client(settings=settings) as client:
        job = client.submit(JobSpec.new([1], steps=2), check=False)
        client.redis.set(other.deployment, b"kept")

    refused = cleanup(settings.prefix, "--json")  # no terminal to ask on, no --yes
    assert refused.returncode == 2 and "expected --yes" in refused.stderr
    assert json.loads(refused.stdout)["ok"] is False and queue_exists(names.jobs)

    dry = json.loads(cleanup(settings.prefix, "--dry-run", "--json").stdout)
    queues = {q["name"]: q for q in dry["queues"]}
    assert set(queues) == {names.jobs, names.dead_letter_queue, names.expert_queue(0), names.expert_queue(1)}
    assert queues[names.jobs]["messages"] == 1 and dry["key_kinds"] == {
        "job": 1,
        "jobs": 1,
        "queue": 2,
    }  # queue: its order and counter
    assert dry["deleted"] is False and queue_exists(names.jobs)

    with amqp_channel() as ch:  # a worker still consuming: refused unless --force
        ch.basic_consume(names.expert_queue(0), lambda *a: None)
        busy = cleanup(settings.prefix, "--yes")
        assert busy.returncode == 1 and "1 consumer(s) still read the queues" in busy.stderr

    done = cleanup(settings.prefix, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (
        shown["deleted"] is True and shown["keys"] == 4 and shown["exchanges"] == [names.dead_letter_exchange]
    )
    assert not any(queue_exists(q) for q in queues)
    assert not client.redis.exists(names.job(job), names.jobs_index)
    assert queue_exists(other.jobs) and client.redis.get(other.deployment) == b"kept"

    again = json.loads(cleanup(settings.prefix, "--yes", "--json").stdout)
    assert (again["keys"], again["queues"], again["deleted"]) == (0, [], False)


def test_a_prefix_no_deployment_could_have_is_refused():
    bad = cleanup("no spaces*")
    assert bad.returncode == 2 and "expected prefix of 0..64 chars" in bad.stderr
