"""Doctor checks of the services: RabbitMQ and Redis answer, and this user may do what its role does
(declare the prefix's queues and publish through the default exchange; write a key in Redis)."""

from __future__ import annotations

import contextlib
import uuid

from ddm.ops.doctor.checks import FAIL, OK, Check
from ddm.runtime.redis_conn import HOW_TO_START
from ddm.schema.errors import ServiceUnavailableError
from ddm.schema.settings import Settings, redact

BROKER_FIX = (
    "start RabbitMQ (`rabbitmq-server -detached`, or `docker compose up -d rabbitmq`) or point "
    "DDM_AMQP_URL at a running one"
)
BROKER_PERMISSIONS_FIX = (
    "grant this broker user configure/write/read on the prefix's queues as docs/DEPLOY.md section 2 "
    "shows for its role (rabbitmqctl set_permissions), or check DDM_PREFIX and DDM_QUEUE_TYPE"
)
REDIS_PERMISSIONS_FIX = (
    "give this Redis user its keys and commands as docs/DEPLOY.md section 2 shows (ACL SETUSER), or "
    "check the password in DDM_REDIS_URL"
)


def broker(settings: Settings) -> tuple[Check, object | None]:
    """(the check, an open connection for the permission check, or None)."""
    from ddm.runtime.amqp import connect

    where = redact(settings.amqp_url)
    try:
        conn = connect(settings.amqp_url, name="ddm-doctor")
    except ServiceUnavailableError as exc:
        return Check("rabbitmq", FAIL, str(exc), BROKER_FIX), None
    return Check("rabbitmq", OK, f"RabbitMQ answers at {where}"), conn


def redis_server(settings: Settings) -> tuple[Check, object | None]:
    from ddm.runtime.redis_conn import connect_redis

    where = redact(settings.redis_url)
    try:
        r = connect_redis(settings.redis_url)
    except ServiceUnavailableError as exc:
        return Check("redis", FAIL, str(exc), HOW_TO_START), None
    try:
        version = r.info("server").get("redis_version", "?")
    except Exception:  # noqa: BLE001 - INFO may be refused to a least-privilege user; PING answered
        version = "?"
    return Check("redis", OK, f"Redis {version} answers at {where}"), r


def broker_permissions(conn, settings: Settings, expert_ids: list[int], jobs: bool) -> Check:
    """Declare what the role declares (the dead-letter queue, ddm.jobs unless jobs=False, the expert
    queues), then publish a probe through the default exchange to a queue that does not exist: the
    broker returns it unroutable, so no consumer ever sees it."""
    import pika

    from ddm.runtime.amqp import declare_topology

    names = settings.names
    channel = conn.channel()
    try:
        channel.confirm_delivery()
        declare_topology(channel, names, expert_ids, jobs=jobs, queue_type=settings.queue_type)
        probe = f"{names.prefix}ddm.doctor.{uuid.uuid4().hex[:12]}"
        # unroutable: the broker took it and found no queue, so publishing is allowed
        with contextlib.suppress(pika.exceptions.UnroutableError):
            channel.basic_publish("", probe, b"ddm doctor probe", mandatory=True)
    except pika.exceptions.ChannelClosedByBroker as exc:
        return Check(
            "rabbitmq permissions", FAIL, f"the broker refused: {exc.reply_text}", BROKER_PERMISSIONS_FIX
        )
    finally:
        if channel.is_open:
            channel.close()
    declared = [names.dead_letter_queue] + ([names.jobs] if jobs else [])
    declared += [names.expert_queue(k) for k in expert_ids]
    return Check("rabbitmq permissions", OK, f"declared {', '.join(declared)}; publishing allowed")


def redis_permissions(r, settings: Settings) -> Check:
    """Write, expire and delete a scratch hash where a heartbeat would go (every role's Redis user may
    write there; it is in no index, so nobody lists it)."""
    import redis

    key = settings.names.worker(f"ddm-doctor-{uuid.uuid4().hex[:12]}")
    try:
        pipe = r.pipeline(transaction=False)
        pipe.hset(key, "probe", "1")
        pipe.expire(key, 10)
        pipe.delete(key)
        pipe.execute()
    except redis.ResponseError as exc:
        return Check(
            "redis permissions", FAIL, f"Redis refused a write to {key}: {exc}", REDIS_PERMISSIONS_FIX
        )
    return Check("redis permissions", OK, f"wrote and deleted {key}")
