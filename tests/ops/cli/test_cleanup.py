"""`ddm cleanup --prefix P` on the real broker and Redis: asks first (refuses without a terminal unless
--yes), shows what it would delete with --dry-run, refuses while workers consume, then deletes exactly
the prefix's queues, exchange and keys, and says so in --json; another prefix is untouched, even one
that starts with P ('a.ddm:' beside 'a.'); the empty prefix only with --empty-prefix. delete_prefix
(the tests' and `ddm bench`'s) takes exactly one prefix too."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field

import pika.exceptions
import pytest

from ddm.ops.cleanup import delete_prefix
from ddm.runtime.amqp import declare_topology
from ddm.runtime.redis_conn import redis_client
from ddm.schema.messages import JobSpec
from ddm.schema.names import Names
from tests.support.harness import DDM_CLI, service_env
from tests.support.services import AMQP_URL, REDIS_URL, amqp_channel, cleanup_prefix, new_prefix


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
        "jobs_index": 1,
        "queue": 1,  # the queue's order and its counter
        "queue_seq": 1,
    }
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


NEIGHBOUR_EXPERTS = (0, 70)  # 70: above the 64 expert queues `ddm cleanup` looked for by default


@dataclass
class Neighbourhood:
    """A prefix 'T' (t<random>a.) beside prefixes that start with it or with its letters, the empty
    prefix and 'ddm:', each with keys and queues of its own; and a key that starts with T + 'ddm:' but
    is no shape of ours. Records every name it made, to check what went and to delete it all after."""

    target: str
    keys: dict[str, list[str]] = field(default_factory=dict)  # prefix -> its keys
    queues: dict[str, list[str]] = field(default_factory=dict)  # prefix -> its queues
    strangers: list[str] = field(default_factory=list)  # keys of no prefix

    def all_keys(self) -> list[str]:
        return [k for keys in self.keys.values() for k in keys] + self.strangers

    def all_queues(self) -> list[str]:
        return [q for queues in self.queues.values() for q in queues]

    def existing(self) -> tuple[set[str], set[str]]:
        """Which of the keys and queues made still exist."""
        r = redis_client(REDIS_URL)
        try:
            keys = {k for k in self.all_keys() if r.exists(k)}
        finally:
            r.close()
        return keys, {q for q in self.all_queues() if queue_exists(q)}


def _keys_of(names: Names, tag: str) -> list[str]:
    return [names.job(tag), names.traj(tag), names.worker(f"w:{tag}"), names.jobs_index, names.queue_seq]


@pytest.fixture
def neighbourhood():
    tag = uuid.uuid4().hex[:10]
    target = f"t{tag}a."
    hood = Neighbourhood(target)
    for prefix in (target, f"{target}ddm:", f"{target}ddm.", f"t{tag}ab."):  # each with its topology
        names = Names(prefix)
        hood.keys[prefix] = [*_keys_of(names, tag), names.deployment]
        hood.queues[prefix] = [names.jobs, names.dead_letter_queue, names.decoder_queue]
        hood.queues[prefix] += [names.expert_queue(k) for k in NEIGHBOUR_EXPERTS]
        with amqp_channel() as ch:
            declare_topology(ch, names, NEIGHBOUR_EXPERTS, queue_type="classic", decoder=True)
    for shared in ("", "ddm:"):  # shared prefixes: random ids only, and no queues (their names are fixed)
        hood.keys[shared] = _keys_of(Names(shared), tag)[:3]
    hood.strangers = [f"{target}ddm:unknown", f"{target}ddm:job:no spaces"]
    r = redis_client(REDIS_URL)
    r.mset({key: b"x" for key in hood.all_keys()})
    yield hood
    r.delete(*hood.all_keys())  # by name: the teardown does not trust the code under test
    r.close()
    with amqp_channel() as ch:
        for q in hood.all_queues():
            ch.queue_delete(q)
        for prefix in hood.queues:
            ch.exchange_delete(Names(prefix).dead_letter_exchange)


def ddm_cleanup(*args: str) -> subprocess.CompletedProcess:
    argv = [*DDM_CLI, "cleanup", *args]
    env = service_env("")
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_cleanup_takes_exactly_its_prefix_and_its_dry_run_says_what(neighbourhood):
    hood, target = neighbourhood, neighbourhood.target
    dry = ddm_cleanup("--prefix", target, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    planned_queues = {q["name"] for q in plan["queues"]}
    assert plan["key_names"] == sorted(hood.keys[target]) and plan["exchanges"] == [
        Names(target).dead_letter_exchange
    ]
    listed = plan["queue_listing"] == "rabbitmqctl"  # expert 70 is only in the broker's list
    assert planned_queues == {q for q in hood.queues[target] if listed or not q.endswith(".70")}
    assert Names(target).decoder_queue in planned_queues

    before_keys, before_queues = hood.existing()
    done = ddm_cleanup("--prefix", target, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    after_keys, after_queues = hood.existing()
    assert before_keys - after_keys == set(plan["key_names"])  # what went is what the dry run listed
    assert before_queues - after_queues == planned_queues
    assert after_keys == set(hood.all_keys()) - set(hood.keys[target])  # every neighbour's key stays
    assert not queue_exists(Names(target).decoder_queue)


def test_the_empty_prefix_only_with_its_flag(neighbourhood):
    refused = ddm_cleanup("--prefix", "", "--dry-run", "--json")
    assert refused.returncode == 2 and "expected a non-empty --prefix" in refused.stderr
    assert json.loads(refused.stdout)["ok"] is False

    dry = ddm_cleanup("--empty-prefix", "--dry-run", "--json")  # a dry run: the shared prefix is kept
    assert dry.returncode == 0, dry.stderr
    planned = set(json.loads(dry.stdout)["key_names"])
    assert set(neighbourhood.keys[""]) <= planned
    assert not planned & (set(neighbourhood.all_keys()) - set(neighbourhood.keys[""]))  # not 'ddm:'s


def test_delete_prefix_takes_exactly_its_prefix(neighbourhood):
    hood, target = neighbourhood, neighbourhood.target
    delete_prefix(AMQP_URL, REDIS_URL, target, NEIGHBOUR_EXPERTS)
    keys, queues = hood.existing()
    assert keys == set(hood.all_keys()) - set(hood.keys[target])
    assert queues == set(hood.all_queues()) - set(hood.queues[target])  # its decoder queue went too
