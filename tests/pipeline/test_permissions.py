"""The least-privilege broker permissions and Redis ACLs of docs/DEPLOY.md, run as written there.

The `rabbitmqctl set_permissions` and `ACL SETUSER` lines are read from DEPLOY.md; only the vhost,
the user names, the passwords and the test's queue/key prefix are swapped in. Then the real router,
two expert workers and a client serve a job end to end with those users, and an expert's user is
refused what it must not do. Needs `rabbitmqctl` for the local broker (as root, like CI); skipped
where it cannot run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.parse
import uuid
from pathlib import Path

import numpy as np
import pika
import pika.exceptions
import pytest
import redis

from ddm.client.client import Client
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline
from tests.support.services import amqp_channel

DEPLOY_MD = Path(__file__).resolve().parents[2] / "docs" / "DEPLOY.md"
PERMISSION_RE = re.compile(r"^rabbitmqctl set_permissions -p ddm (\S+) '([^']*)' '([^']*)' '([^']*)'$")
ACL_RE = re.compile(r"^ACL SETUSER (\S+) (.+)$")


def doc_block(marker: str) -> list[str]:
    """The lines of the first fenced block after the `<!-- marker:` comment in DEPLOY.md."""
    text = DEPLOY_MD.read_text()
    start = text.index(f"<!-- {marker}:")
    block = text[start:].split("```", 2)[1]
    return [line.strip() for line in block.splitlines()[1:] if line.strip()]


def doc_permissions(prefix: str) -> dict[str, tuple[str, str, str]]:
    """{user: (configure, write, read)} from DEPLOY.md, with `prefix` put before every `ddm\\.`."""
    out = {}
    for line in doc_block("permissions"):
        m = PERMISSION_RE.match(line)
        assert m, f"DEPLOY.md: not a set_permissions line: {line}"
        user, *regexes = m.groups()
        out[user] = tuple(r.replace(r"ddm\.", re.escape(prefix) + r"ddm\.") for r in regexes)
    return out


def doc_acls(prefix: str, password: str) -> dict[str, list[str]]:
    """{user: ACL SETUSER rules} from DEPLOY.md, with the prefix in key patterns and our password."""
    out = {}
    for line in doc_block("redis-acl"):
        m = ACL_RE.match(line)
        assert m, f"DEPLOY.md: not an ACL SETUSER line: {line}"
        rules = [
            f">{password}" if r.startswith(">") else r.replace("~ddm:", f"~{prefix}ddm:")
            for r in m.group(2).split()
        ]
        out[m.group(1)] = rules
    return out


def rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=120)


def test_the_documented_roles_are_complete():
    assert set(doc_permissions("")) == {"ddm-expert0", "ddm-expert1", "ddm-router", "ddm-client"}
    assert set(doc_acls("", "x")) == {"ddm-expert", "ddm-router", "ddm-client"}


@pytest.fixture(scope="module")
def locked_down(label_split_deployment, tmp_path_factory, amqp_url, redis_url):
    """The pipeline with one broker user and one Redis user per role, in a vhost of its own."""
    broker = pika.URLParameters(amqp_url)
    if shutil.which("rabbitmqctl") is None or broker.host not in ("127.0.0.1", "localhost"):
        pytest.skip("needs rabbitmqctl for the local broker")
    if rabbitmqctl("list_vhosts").returncode != 0:
        pytest.skip("rabbitmqctl cannot reach the local broker (not root?)")
    tag = f"t{uuid.uuid4().hex[:8]}"
    vhost, password = f"{tag}-ddm", uuid.uuid4().hex
    admin = redis.Redis.from_url(redis_url)
    pipe = Pipeline(label_split_deployment, tmp_path_factory.mktemp("logs"))
    redis_parts = urllib.parse.urlsplit(redis_url)
    amqp, rds, users, acl_users = {}, {}, [], []
    try:
        assert rabbitmqctl("add_vhost", vhost).returncode == 0
        for user, (conf, write, read) in doc_permissions(pipe.prefix).items():
            name = f"{tag}-{user}"
            assert rabbitmqctl("add_user", name, password).returncode == 0
            users.append(name)
            done = rabbitmqctl("set_permissions", "-p", vhost, name, conf, write, read)
            assert done.returncode == 0, done.stderr
            amqp[user] = f"amqp://{name}:{password}@{broker.host}:{broker.port}/{vhost}"
        for user, rules in doc_acls(pipe.prefix, password).items():
            name = f"{tag}-{user}"
            admin.execute_command("ACL", "SETUSER", name, *rules)
            acl_users.append(name)
            netloc = f"{name}:{password}@{redis_parts.hostname}:{redis_parts.port or 6379}"
            rds[user] = urllib.parse.urlunsplit((redis_parts.scheme, netloc, redis_parts.path, "", ""))

        for name, k in (("e0", 0), ("e1", 1)):
            pipe.env.update(DDM_AMQP_URL=amqp[f"ddm-expert{k}"], DDM_REDIS_URL=rds["ddm-expert"])
            pipe.start_expert(k, name)
        pipe.env.update(DDM_AMQP_URL=amqp["ddm-router"], DDM_REDIS_URL=rds["ddm-router"])
        pipe.start_router("router")
        pipe.wait_ready("e0", "e1", "router")
        yield pipe, amqp, rds
    finally:
        pipe.close()
        for name in users:
            rabbitmqctl("delete_user", name)
        rabbitmqctl("delete_vhost", vhost)  # and every queue in it
        for name in acl_users:
            admin.execute_command("ACL", "DELUSER", name)
        admin.close()


def test_a_job_runs_with_the_documented_permissions(locked_down, label_split_deployment):
    pipe, amqp, rds = locked_down
    client = Client(amqp_url=amqp["ddm-client"], redis_url=rds["ddm-client"], prefix=pipe.prefix)
    spec = JobSpec.new(list(range(10)), steps=4, strategy="oracle", seed=5)
    client.submit(spec)
    images = client.result(spec.job_id, timeout=120)
    assert images.shape == (10, 1, 32, 32) and np.isfinite(images).all()
    assert pipe.counter("e0", "requests", 4) >= 4 and pipe.counter("e1", "requests", 4) >= 4

    from ddm.runtime.queue_probe import QueueProbe  # the UI's queue gauges, with the client's user

    probe = QueueProbe(amqp["ddm-client"])
    try:
        queues = [pipe.names.jobs, pipe.names.expert_queue(0), pipe.names.expert_queue(1)]
        assert all(v is not None for v in probe.depths(queues).values())
    finally:
        probe.close()


def refused(url: str, action) -> int:
    """The reply code the broker closes the channel with when `action(channel)` runs."""
    with amqp_channel(url) as ch, pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
        action(ch)
    return err.value.reply_code


def test_an_expert_may_only_consume_its_own_queue(locked_down):
    pipe, amqp, rds = locked_down
    url, names = amqp["ddm-expert0"], pipe.names
    noop = lambda *a: None  # noqa: E731
    assert refused(url, lambda ch: ch.basic_consume(names.jobs, noop)) == 403
    assert refused(url, lambda ch: ch.basic_consume(names.expert_queue(1), noop)) == 403
    assert refused(url, lambda ch: ch.queue_delete(names.jobs)) == 403
    assert refused(url, lambda ch: ch.queue_delete(names.expert_queue(1))) == 403
    assert refused(url, lambda ch: ch.queue_purge(names.expert_queue(1))) == 403
    assert refused(url, lambda ch: ch.queue_declare("mine", durable=True)) == 403
    assert refused(url, lambda ch: ch.exchange_declare("mine", exchange_type="fanout")) == 403
    # and the client's user cannot read what the experts are asked
    assert refused(amqp["ddm-client"], lambda ch: ch.basic_consume(names.expert_queue(0), noop)) == 403

    r = redis.Redis.from_url(rds["ddm-expert"])
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.hgetall(pipe.names.job("someone"))
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.set(f"{pipe.prefix}ddm:result:x", b"forged")
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.flushall()
    finally:
        r.close()
    r = redis.Redis.from_url(rds["ddm-client"])
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.keys("*")  # -@dangerous
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.get("not-ours")  # outside the deployment's keys
    finally:
        r.close()
