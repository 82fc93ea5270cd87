"""Which prefix owns a name (schema.names.name_owner, through ops.cleanup.owns): exactly one prefix
followed by one of the builder's shapes, ids valid; a name that two prefixes could read goes to the
longer; and find_prefix looks for the expert queues the published descriptor names."""

from __future__ import annotations

import pytest

from ddm.ops import cleanup
from ddm.ops.cleanup import find_prefix, owns
from ddm.runtime.amqp import declare_topology
from ddm.runtime.redis_conn import redis_client
from ddm.schema.names import Names, name_owner
from tests.support.descriptors import demo_descriptor
from tests.support.services import amqp_channel

PREFIXES = ["", "a.", "a.ddm:", "a.ddm.", "ab.", "x-y_z:0", "p" * 64]


def every_name(names: Names) -> dict[str, str]:
    """Each Names member -> what it builds under `names.prefix`, ids that look like shapes included."""
    return {
        "jobs": names.jobs,
        "expert_queue": names.expert_queue(1023),
        "replica_queue": names.replica_queue(3, "host:1.ddm.x@y"),
        "decoder_queue": names.decoder_queue,
        "dead_letter_exchange": names.dead_letter_exchange,
        "dead_letter_queue": names.dead_letter_queue,
        "job": names.job("j-1"),
        "traj": names.traj("ddm"),
        "state": names.state("j_1"),
        "lease": names.lease("J"),
        "result": names.result("r"),
        "result_image": names.result_image("i"),
        "worker": names.worker("ddm:w"),
        "workers_index": names.workers_index,
        "deployment": names.deployment,
        "jobs_index": names.jobs_index,
        "queue": names.queue,
        "queue_seq": names.queue_seq,
        "job_ends": names.job_ends,
    }


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_name_reads_back_as_its_prefix_and_member(prefix):
    for member, name in every_name(Names(prefix)).items():
        owner = name_owner(name)
        assert (owner.prefix, owner.member) == (prefix, member), name
        assert owner.redis_key == name.removeprefix(prefix).startswith("ddm:")


@pytest.mark.parametrize(
    "name, owner",
    [
        ("a.ddm:ddm:job:x", "a.ddm:"),  # 'a.' + 'ddm:ddm:job:x' is no shape
        ("a.ddm.ddm.jobs", "a.ddm."),
        ("ab.ddm:jobs", "ab."),
        ("ddm:ddm:jobs", "ddm:"),
        ("a.ddm:worker:ddm:jobs", "a.ddm:worker:"),  # 'a.''s worker 'ddm:jobs' too: the longer wins
    ],
)
def test_a_name_belongs_to_one_prefix_only(name, owner):
    assert name_owner(name).prefix == owner
    candidates = {"", "a.", "ab.", "a.ddm:", "a.ddm.", "ddm:", owner}
    assert [p for p in candidates if owns(p, name, redis_key=":" in name[len(owner) :])] == [owner]


@pytest.mark.parametrize(
    "name",
    [
        "a.ddm:unknown",
        "a.ddm:job:",  # an empty job id
        "a.ddm:job:no spaces",
        "a.ddm.expert.007",  # the builder writes 7
        "a.ddm.expert.1_0",
        "a.ddm.expert.1024",  # above MAX_EXPERT_ID
        "a.ddm.expert.1.replica.",
        "a b.ddm.jobs",  # no prefix has a space
        "p" * 65 + "ddm.jobs",  # nor 65 chars
        "a.ddm.jobs.x",
    ],
)
def test_what_no_builder_makes_belongs_to_no_prefix(name):
    assert name_owner(name) is None


def test_a_queue_name_is_no_redis_key():
    assert owns("a.", "a.ddm.jobs", redis_key=False) and not owns("a.", "a.ddm.jobs", redis_key=True)
    assert owns("a.", "a.ddm:jobs", redis_key=True) and not owns("a.", "a.ddm:jobs", redis_key=False)


def test_find_prefix_looks_for_the_descriptors_experts(settings, monkeypatch):
    monkeypatch.setattr(cleanup, "listed_queues", lambda url: ([], "not read: this test"))
    names = settings.names
    with amqp_channel() as ch:
        declare_topology(ch, names, [0, 1], queue_type="classic")
    r = redis_client(settings.redis_url)
    r.set(names.deployment, demo_descriptor().encode())  # experts 0 and 1
    r.close()
    found = find_prefix(settings.amqp_url, settings.redis_url, settings.prefix, max_experts=0)
    queues = {q.name for q in found.queues}
    assert queues == {names.jobs, names.dead_letter_queue, names.expert_queue(0), names.expert_queue(1)}
    assert found.keys == (names.deployment,) and found.listing == "not read: this test"
