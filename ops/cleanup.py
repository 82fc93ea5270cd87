"""Delete everything one prefix made: its Redis keys, queues and dead-letter exchange. For throwaway
prefixes only (tests, `ddm bench`): a production prefix holds jobs people are waiting for."""

from __future__ import annotations

from collections.abc import Iterable

from ddm.runtime.amqp import connect
from ddm.runtime.redis_conn import redis_client
from ddm.schema.errors import ServiceUnavailableError
from ddm.schema.names import Names


def delete_prefix(amqp_url: str, redis_url: str, prefix: str, expert_ids: Iterable[int]) -> None:
    r = redis_client(redis_url)
    keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()
    names = Names(prefix)
    try:
        conn = connect(amqp_url)
    except ServiceUnavailableError:
        return  # the broker is gone (a restart test): its queues went with it or are reused by nobody
    ch = conn.channel()
    for q in [names.jobs, names.dead_letter_queue] + [names.expert_queue(k) for k in expert_ids]:
        ch.queue_delete(q)
    ch.exchange_delete(names.dead_letter_exchange)
    conn.close()
