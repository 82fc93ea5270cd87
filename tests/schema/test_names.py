"""Queue names and Redis keys: every format pinned, so no process invents its own."""

import pytest

from ddm.schema import ConfigError, Names, SchemaError


@pytest.mark.parametrize("prefix", ["", "test-1:"])
def test_every_name_is_pinned(prefix):
    n = Names(prefix)
    p = prefix
    assert n.jobs == f"{p}ddm.jobs"
    assert n.expert_queue(0) == f"{p}ddm.expert.0"
    assert n.expert_queue(12) == f"{p}ddm.expert.12"
    assert n.dead_letter_exchange == f"{p}ddm.dlx"
    assert n.dead_letter_queue == f"{p}ddm.dead"
    assert n.job("abc_1-2") == f"{p}ddm:job:abc_1-2"
    assert n.traj("abc") == f"{p}ddm:traj:abc"
    assert n.state("abc") == f"{p}ddm:state:abc"
    assert n.result("abc") == f"{p}ddm:result:abc"
    assert n.worker("host-1.eu:4@gpu") == f"{p}ddm:worker:host-1.eu:4@gpu"
    assert n.workers_index == f"{p}ddm:workers"
    assert n.jobs_index == f"{p}ddm:jobs"
    assert n.deployment == f"{p}ddm:deployment"
    assert n.lease("j1") == f"{p}ddm:lease:j1"
    assert n.queue == f"{p}ddm:queue"
    assert n.queue_seq == f"{p}ddm:queue:seq"
    assert n.job_ends == f"{p}ddm:ends"
    assert n.crash_record("0123456789abcdef" * 2) == f"{p}ddm:crash:{'0123456789abcdef' * 2}"


def test_literal_formats():
    """The same pins written out literally, in case an f-string above and the code share a typo."""
    n = Names()
    assert [n.jobs, n.expert_queue(1), n.dead_letter_exchange, n.dead_letter_queue] == [
        "ddm.jobs",
        "ddm.expert.1",
        "ddm.dlx",
        "ddm.dead",
    ]
    assert [n.job("j"), n.traj("j"), n.state("j"), n.result("j"), n.worker("w")] == [
        "ddm:job:j",
        "ddm:traj:j",
        "ddm:state:j",
        "ddm:result:j",
        "ddm:worker:w",
    ]
    assert (n.workers_index, n.jobs_index) == ("ddm:workers", "ddm:jobs")
    assert (n.queue, n.queue_seq, n.job_ends) == ("ddm:queue", "ddm:queue:seq", "ddm:ends")
    assert Names("ci.").job("j") == "ci.ddm:job:j"
    assert n.crash_record("f" * 32) == "ddm:crash:ffffffffffffffffffffffffffffffff"


@pytest.mark.parametrize("prefix", ["a b", "x/", "é", "a\n", "p" * 65, None])
def test_bad_prefix(prefix):
    with pytest.raises(ConfigError, match="prefix"):
        Names(prefix)


@pytest.mark.parametrize(
    "call",
    [
        lambda n: n.expert_queue(-1),
        lambda n: n.expert_queue(True),
        lambda n: n.expert_queue("0"),
        lambda n: n.expert_queue(1024),
        lambda n: n.job(""),
        lambda n: n.job("a:b"),  # would alias another key
        lambda n: n.traj("a*"),  # a Redis glob
        lambda n: n.state("j\n"),
        lambda n: n.result("x" * 65),
        lambda n: n.worker("a b"),
        lambda n: n.worker(""),
        lambda n: n.crash_record("F" * 32),  # a digest is lower-case hex
        lambda n: n.crash_record("0" * 31),
    ],
)
def test_bad_ids(call):
    with pytest.raises(SchemaError, match="expected"):
        call(Names())


def test_frozen_and_equal():
    assert Names("a") == Names("a")
    with pytest.raises(AttributeError):
        Names().prefix = "x"  # type: ignore[misc]
