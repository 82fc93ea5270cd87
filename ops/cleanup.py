"""Delete everything one prefix made: its Redis keys, queues and dead-letter exchange. delete_prefix is
for throwaway prefixes (tests, `ddm bench`); find_prefix + delete_contents are `ddm cleanup`'s: first
what is there (shown for confirmation), then deleting exactly that."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pika.exceptions

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


@dataclass(frozen=True)
class QueueFound:
    name: str
    messages: int
    consumers: int


@dataclass(frozen=True)
class PrefixContents:
    """What one prefix holds: its Redis keys (by kind: job, traj, worker, ...) and its durable queues."""

    prefix: str
    keys: tuple[str, ...]
    queues: tuple[QueueFound, ...]
    exchange: str | None  # the dead-letter exchange, when it exists

    def key_kinds(self) -> dict[str, int]:
        kinds = Counter(key[len(self.prefix) + len("ddm:") :].split(":", 1)[0] for key in self.keys)
        return dict(sorted(kinds.items()))

    @property
    def consumers(self) -> int:
        return sum(q.consumers for q in self.queues)

    @property
    def empty(self) -> bool:
        return not self.keys and not self.queues and self.exchange is None

    def to_dict(self) -> dict:
        return {
            "prefix": self.prefix,
            "keys": len(self.keys),
            "key_kinds": self.key_kinds(),
            "queues": [asdict(q) for q in self.queues],
            "exchanges": [self.exchange] if self.exchange else [],
        }


def _passive(conn, declare):
    """The broker's answer to one passive declare, or None for a queue or exchange that does not exist
    (404 closes the channel, so each probe gets its own)."""
    ch = conn.channel()
    try:
        return declare(ch)
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 404:
            raise
        return None
    finally:
        if ch.is_open:
            ch.close()


def find_prefix(amqp_url: str, redis_url: str, prefix: str, max_experts: int = 64) -> PrefixContents:
    """Everything of `prefix`: keys `{prefix}ddm:*`, the queues ddm.jobs, ddm.dead and ddm.expert.0 ..
    max_experts-1 that exist (passive declares: message and consumer counts), and ddm.dlx."""
    names = Names(prefix)
    r = redis_client(redis_url)
    try:
        keys = sorted(k.decode() for k in r.scan_iter(match=f"{prefix}ddm:*", count=1000))
    finally:
        r.close()
    conn = connect(amqp_url)
    try:
        queues = []
        for q in [names.jobs, names.dead_letter_queue] + [names.expert_queue(k) for k in range(max_experts)]:
            ok = _passive(conn, lambda ch, q=q: ch.queue_declare(q, passive=True))
            if ok is not None:
                queues.append(QueueFound(q, ok.method.message_count, ok.method.consumer_count))
        dlx = names.dead_letter_exchange
        exists = _passive(conn, lambda ch: ch.exchange_declare(dlx, passive=True)) is not None
    finally:
        conn.close()
    return PrefixContents(prefix, tuple(keys), tuple(queues), dlx if exists else None)


def delete_contents(amqp_url: str, redis_url: str, found: PrefixContents) -> None:
    """Delete what find_prefix found (keys made since are left; a queue gone since is no error)."""
    r = redis_client(redis_url)
    try:
        for i in range(0, len(found.keys), 1000):
            r.delete(*found.keys[i : i + 1000])
    finally:
        r.close()
    conn = connect(amqp_url)
    try:
        ch = conn.channel()
        for q in found.queues:
            ch.queue_delete(q.name)
        if found.exchange:
            ch.exchange_delete(found.exchange)
    finally:
        conn.close()
