"""Delete everything one prefix made: its Redis keys, queues and dead-letter exchange, and nothing of any
other prefix. delete_prefix is for throwaway prefixes (tests, `ddm bench`); find_prefix + delete_contents
are `ddm cleanup`'s: first the plan (what is there, shown for confirmation or as the dry run), then
deleting exactly that plan.

Exactly one prefix: a key or queue is the prefix's only when schema.names.name_owner gives it to that
prefix (it is the prefix followed by one of the builder's own shapes, ids valid, and no longer prefix
reads it so), never because its name merely starts with the prefix: 'a.' must not take 'a.ddm:'s keys.

Which queues: every queue the topology declares (ddm/runtime/amqp.py declare_topology: ddm.jobs,
ddm.dead, ddm.decoder, ddm.expert.<k>) for the experts 0..K-1, the published descriptor's and the
caller's, probed by passive declares over the AMQP URL (works against any broker, remote ones too);
plus the prefix's queues the broker lists, when `rabbitmqctl` runs on the broker's host (the management
API is not assumed: it is often not enabled or not published). A listed name is only a candidate: it
is probed over the AMQP URL like the others, so a listing of another broker adds nothing wrong.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pika
import pika.exceptions

from ddm.runtime.amqp import connect
from ddm.runtime.redis_conn import redis_client
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import SchemaError, ServiceUnavailableError
from ddm.schema.names import Names, name_owner, redis_key_pattern
from ddm.schema.settings import split_urls

RABBITMQCTL_TIMEOUT_S = 15.0
SCAN_COUNT = 1000
DELETE_BATCH = 1000


def owns(prefix: str, name: str, redis_key: bool) -> bool:
    """`name` is one of `prefix`'s own Redis keys (redis_key) or queue names: see name_owner."""
    owner = name_owner(name)
    return owner is not None and owner.prefix == prefix and owner.redis_key == redis_key


def owned_keys(r, prefix: str) -> list[str]:
    """Every Redis key of exactly `prefix`, sorted (SCAN, so keys written meanwhile may be missed)."""
    scanned = (k.decode() for k in r.scan_iter(match=redis_key_pattern(prefix), count=SCAN_COUNT))
    return sorted(k for k in scanned if owns(prefix, k, redis_key=True))


def topology_queues(names: Names, expert_ids: Iterable[int]) -> list[str]:
    """The queues declare_topology declares for these experts (ddm/runtime/amqp.py), decoder included."""
    experts = [names.expert_queue(k) for k in sorted(set(expert_ids))]
    return [names.jobs, names.dead_letter_queue, names.decoder_queue, *experts]


def delete_prefix(amqp_url: str, redis_url: str, prefix: str, expert_ids: Iterable[int]) -> None:
    """Delete `prefix`'s keys and its topology for `expert_ids`, without looking first (deleting a queue
    that does not exist is no error)."""
    r = redis_client(redis_url)
    try:
        _delete_keys(r, owned_keys(r, prefix))
    finally:
        r.close()
    names = Names(prefix)
    try:
        conn = connect(amqp_url)
    except ServiceUnavailableError:
        return  # the broker is gone (a restart test): its queues went with it or are reused by nobody
    try:
        _delete_amqp(conn.channel(), topology_queues(names, expert_ids), names.dead_letter_exchange)
    finally:
        conn.close()


@dataclass(frozen=True)
class QueueFound:
    name: str
    messages: int
    consumers: int


@dataclass(frozen=True)
class PrefixContents:
    """The plan for one prefix: its Redis keys, its durable queues, its dead-letter exchange, and how the
    queues were looked for (listing: 'rabbitmqctl', or why the broker's list was not read)."""

    prefix: str
    keys: tuple[str, ...]
    queues: tuple[QueueFound, ...]
    exchange: str | None  # the dead-letter exchange, when it exists
    listing: str

    def key_kinds(self) -> dict[str, int]:
        """How many keys of each kind, by the Names member that builds them (job, traj, worker, ...)."""
        kinds = Counter(name_owner(key).member for key in self.keys)
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
            "key_names": list(self.keys),
            "queues": [asdict(q) for q in self.queues],
            "exchanges": [self.exchange] if self.exchange else [],
            "queue_listing": self.listing,
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


def _on_this_host(amqp_url: str) -> bool:
    """Some broker of the URL listens on this machine's loopback (so the local rabbitmqctl reaches it)."""
    for url in split_urls(amqp_url):
        host = pika.URLParameters(url).host
        try:
            if host == "localhost" or ipaddress.ip_address(host).is_loopback:
                return True
        except ValueError:
            continue  # a host name
    return False


def listed_queues(amqp_url: str) -> tuple[list[str], str]:
    """The non-exclusive queues of the URL's virtual host by `rabbitmqctl list_queues`, and 'rabbitmqctl';
    or no names and why not. Exclusive queues (a replica's own) are left out: they go with their
    worker's connection, and another connection may neither probe nor delete them (RESOURCE_LOCKED)."""
    if not _on_this_host(amqp_url):
        return [], "not read: the broker is not on this host"
    if shutil.which("rabbitmqctl") is None:
        return [], "not read: no rabbitmqctl on this host"
    vhost = pika.URLParameters(split_urls(amqp_url)[0]).virtual_host
    argv = ["rabbitmqctl", "list_queues", "-q", "-p", vhost, "--formatter", "json", "name", "exclusive"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RABBITMQCTL_TIMEOUT_S)
        rows = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return [], f"not read: rabbitmqctl failed ({exc})"
    if not isinstance(rows, list):
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return [], f"not read: rabbitmqctl failed ({why})"
    return [row["name"] for row in rows if not row.get("exclusive")], "rabbitmqctl"


def _descriptor_experts(r, names: Names) -> list[int]:
    """The expert ids of the descriptor published under the prefix, if one is there and reads."""
    raw = r.get(names.deployment)
    try:
        return [e.id for e in DeploymentDescriptor.decode(raw).experts] if raw else []
    except SchemaError:
        return []  # a descriptor no router could have written: its key goes, it names no queue


def find_prefix(
    amqp_url: str, redis_url: str, prefix: str, max_experts: int = 64, expert_ids: Iterable[int] = ()
) -> PrefixContents:
    """The plan for `prefix`: its own keys (see owns), the queues of the topology that exist for experts
    0..max_experts-1, `expert_ids` and the published descriptor's, the prefix's queues the broker lists
    (listed_queues), with message and consumer counts, and its dead-letter exchange if it exists."""
    names = Names(prefix)
    r = redis_client(redis_url)
    try:
        keys = owned_keys(r, prefix)
        experts = {*range(max_experts), *expert_ids, *_descriptor_experts(r, names)}
    finally:
        r.close()
    listed, listing = listed_queues(amqp_url)
    candidates = topology_queues(names, experts)
    candidates += sorted(q for q in listed if owns(prefix, q, redis_key=False) and q not in candidates)
    conn = connect(amqp_url)
    try:
        queues = []
        for q in candidates:
            ok = _passive(conn, lambda ch, q=q: ch.queue_declare(q, passive=True))
            if ok is not None:
                queues.append(QueueFound(q, ok.method.message_count, ok.method.consumer_count))
        dlx = names.dead_letter_exchange
        exists = _passive(conn, lambda ch: ch.exchange_declare(dlx, passive=True)) is not None
    finally:
        conn.close()
    return PrefixContents(prefix, tuple(keys), tuple(queues), dlx if exists else None, listing)


def delete_contents(amqp_url: str, redis_url: str, found: PrefixContents) -> None:
    """Delete exactly the plan find_prefix made (keys made since are left; a queue gone since is no
    error)."""
    r = redis_client(redis_url)
    try:
        _delete_keys(r, found.keys)
    finally:
        r.close()
    conn = connect(amqp_url)
    try:
        _delete_amqp(conn.channel(), [q.name for q in found.queues], found.exchange)
    finally:
        conn.close()


def _delete_keys(r, keys) -> None:
    for i in range(0, len(keys), DELETE_BATCH):
        r.delete(*keys[i : i + DELETE_BATCH])


def _delete_amqp(channel, queues: Iterable[str], exchange: str | None) -> None:
    for q in queues:
        channel.queue_delete(q)
    if exchange:
        channel.exchange_delete(exchange)
