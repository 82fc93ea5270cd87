"""The one builder for every RabbitMQ queue name and Redis key (tests pin the formats).

A prefix lets several deployments, or test runs, share one broker and one Redis.
"""

from __future__ import annotations

import functools
import os
import re
import typing
from dataclasses import dataclass

from .errors import ConfigError, SchemaError, expected

PREFIX_RE = re.compile(r"[A-Za-z0-9_.:-]{0,64}")
JOB_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
WORKER_ID_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
MAX_EXPERT_ID = 1023
DIGEST_RE = re.compile(r"[0-9a-f]{32}")
KEY_ID_RE = re.compile(r"[0-9a-f]{8,32}")  # an API key's public id (schema/api_keys.py)


def check_job_id(job_id: object) -> str:
    """Return `job_id` if it is 1..64 chars of [A-Za-z0-9_-], else raise SchemaError."""
    # fullmatch, not match + '$': '$' would also accept a trailing newline.
    if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):
        raise SchemaError(expected("job_id of 1..64 chars [A-Za-z0-9_-]", job_id))
    return job_id


def check_worker_id(worker_id: object) -> str:
    """Return `worker_id` if it is 1..128 chars of [A-Za-z0-9_.:@-], else raise SchemaError."""
    if not isinstance(worker_id, str) or not WORKER_ID_RE.fullmatch(worker_id):
        raise SchemaError(expected("worker_id of 1..128 chars [A-Za-z0-9_.:@-]", worker_id))
    return worker_id


def check_expert_id(expert_id: object) -> int:
    """Return `expert_id` if it is an int in 0..MAX_EXPERT_ID, else raise SchemaError."""
    if type(expert_id) is not int or not 0 <= expert_id <= MAX_EXPERT_ID:
        raise SchemaError(expected(f"expert_id int in 0..{MAX_EXPERT_ID}", expert_id))
    return expert_id


def check_key_id(key_id: object) -> str:
    """Return `key_id` if it is 8..32 lowercase hex digits (an API key's id), else raise SchemaError."""
    if not isinstance(key_id, str) or not KEY_ID_RE.fullmatch(key_id):
        raise SchemaError(expected("an API key id of 8..32 hex digits [0-9a-f]", key_id))
    return key_id


@dataclass(frozen=True)
class Names:
    """Queue names (dots) and Redis keys (colons), all under one optional prefix."""

    prefix: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str) or not PREFIX_RE.fullmatch(self.prefix):
            raise ConfigError(expected("prefix of 0..64 chars [A-Za-z0-9_.:-]", self.prefix))

    # RabbitMQ
    @property
    def jobs(self) -> str:
        """Durable queue of JobSpec messages, consumed by router workers."""
        return f"{self.prefix}ddm.jobs"

    def expert_queue(self, expert_id: int) -> str:
        """Durable queue of VelocityRequests for one expert; its replicas compete on it."""
        return f"{self.prefix}ddm.expert.{check_expert_id(expert_id)}"

    def replica_queue(self, expert_id: int, worker_id: str) -> str:
        """One replica's own queue (exclusive: it goes with the worker's connection), for the requests a
        router hedges to that replica in particular."""
        return f"{self.expert_queue(expert_id)}.replica.{check_worker_id(worker_id)}"

    @property
    def decoder_queue(self) -> str:
        """Durable queue of DecodeRequests (schema/decode_messages.py): a latent deployment's final
        latents, to whichever decoder replica takes them."""
        return f"{self.prefix}ddm.decoder"

    @property
    def text_queue(self) -> str:
        """Durable queue of EncodeRequests (schema/text_messages.py): a text deployment's prompts, to
        whichever text-encoder replica takes them."""
        return f"{self.prefix}ddm.text"

    @property
    def dead_letter_exchange(self) -> str:
        return f"{self.prefix}ddm.dlx"

    @property
    def dead_letter_queue(self) -> str:
        return f"{self.prefix}ddm.dead"

    # Redis
    def job(self, job_id: str) -> str:
        """Hash: status, step, spec of one job."""
        return f"{self.prefix}ddm:job:{check_job_id(job_id)}"

    def traj(self, job_id: str) -> str:
        """Stream of Frames, one per denoising step."""
        return f"{self.prefix}ddm:traj:{check_job_id(job_id)}"

    def state(self, job_id: str) -> str:
        """Latest resumable sampler state of a job (survives a router crash)."""
        return f"{self.prefix}ddm:state:{check_job_id(job_id)}"

    def init_noise(self, job_id: str) -> str:
        """String: the initial noise a job starts from instead of its seed's (schema/jobs.py
        encode_result's format), written by Client.submit with the job hash, named by JobSpec.init_noise."""
        return f"{self.prefix}ddm:init:{check_job_id(job_id)}"

    def lease(self, job_id: str) -> str:
        """The router that runs a job: its lease token, set if absent with an expiry, renewed while it
        runs (one owner per job, whatever the broker delivers twice)."""
        return f"{self.prefix}ddm:lease:{check_job_id(job_id)}"

    def result(self, job_id: str) -> str:
        """Final samples of a finished job (a latent deployment's: its latents)."""
        return f"{self.prefix}ddm:result:{check_job_id(job_id)}"

    def result_image(self, job_id: str) -> str:
        """A latent deployment's finished job: its final latents decoded into pixels."""
        return f"{self.prefix}ddm:image:{check_job_id(job_id)}"

    def worker(self, worker_id: str) -> str:
        """Heartbeat key of one worker (expires after heartbeat_ttl_s)."""
        return f"{self.prefix}ddm:worker:{check_worker_id(worker_id)}"

    @property
    def workers_index(self) -> str:
        """Set of known worker ids."""
        return f"{self.prefix}ddm:workers"

    @property
    def deployment(self) -> str:
        """DeploymentDescriptor JSON of the serving router (expires when no router refreshes it)."""
        return f"{self.prefix}ddm:deployment"

    @property
    def jobs_index(self) -> str:
        """Index of known job ids."""
        return f"{self.prefix}ddm:jobs"

    @property
    def queue(self) -> str:
        """Sorted set of the jobs submitted and not yet started, scored in the order ddm.jobs delivers
        them (schema/queue.py queue_score): queue positions."""
        return f"{self.prefix}ddm:queue"

    @property
    def queue_seq(self) -> str:
        """Counter (INCR at submit) that orders jobs of one priority first in, first out on Redis's side,
        whatever the submitting hosts' clocks say."""
        return f"{self.prefix}ddm:queue:seq"

    def crash_record(self, digest: str) -> str:
        """Hash of one redelivered message's attempts and the last error that ended a worker serving it
        (ddm/runtime/crash_guard.py); digest: its 32 hex digits."""
        if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
            raise SchemaError(expected("a message digest of 32 hex digits", digest))
        return f"{self.prefix}ddm:crash:{digest}"

    def text_embedding(self, key: str) -> str:
        """One prompt's embedding under one encoder (ddm/runtime/embeddings.py); key: 32 hex digits
        (schema/text_messages.py embedding_key), shared by every job with that prompt."""
        if not isinstance(key, str) or not DIGEST_RE.fullmatch(key):
            raise SchemaError(expected("an embedding key of 32 hex digits", key))
        return f"{self.prefix}ddm:text:{key}"

    @property
    def job_ends(self) -> str:
        """List of the latest job ends a router measured (schema/queue.py JobEnd), newest first: the
        throughput behind queue ETAs."""
        return f"{self.prefix}ddm:ends"

    def api_key(self, key_id: str) -> str:
        """Hash of one web UI API key (schema/api_keys.py ApiKeyRecord): its user, scope, limits and the
        salted hash of its secret, never the secret."""
        return f"{self.prefix}ddm:apikey:{check_key_id(key_id)}"

    def api_quota(self, key_id: str) -> str:
        """Hash of one API key's submit rate, a token bucket (webui/quota.py): tokens left and when."""
        return f"{self.prefix}ddm:apiquota:{check_key_id(key_id)}"

    def api_jobs(self, key_id: str) -> str:
        """Sorted set of one API key's queued and running jobs, for its limit of concurrent jobs
        (webui/quota.py): job ids scored by when their place was reserved."""
        return f"{self.prefix}ddm:apijobs:{check_key_id(key_id)}"

    @property
    def api_keys(self) -> str:
        """Set of every API key id created under the prefix, revoked ones too: keys are on while it is
        not empty (webui/keys.py)."""
        return f"{self.prefix}ddm:apikeys"


# Reading a name back: which prefix and which Names member made it (`ddm cleanup` deletes exactly one
# prefix's names). The shapes are not written a second time: each member is built once on the empty
# prefix with marker ids, and the text around the markers is its shape. A candidate reading is then
# built again with the ids it found, so the member's own validators decide what an id may be.
_MARKER_IDS = {str: "0123456789abcdef" * 2, int: MAX_EXPERT_ID}  # valid as job, worker, digest / expert ids


def _build(member: str, ids: list) -> str:
    """What Names member `member` makes on the empty prefix with `ids` (a property takes none)."""
    made = getattr(Names(), member)
    return made(*ids) if callable(made) else made


@dataclass(frozen=True)
class _Shape:
    member: str
    head: str  # the fixed text before the first id (the whole name when there is no id)
    id_types: tuple[type, ...]
    after: tuple[str, ...]  # the fixed text after each id
    redis_key: bool  # Redis keys have colons, queue and exchange names dots (the class docstring)


@functools.cache
def _shapes() -> tuple[_Shape, ...]:
    shapes = []
    for member, attr in vars(Names).items():
        if member.startswith("_") or not (isinstance(attr, property) or callable(attr)):
            continue
        hints = {} if isinstance(attr, property) else typing.get_type_hints(attr)
        id_types = tuple(t for name, t in hints.items() if name != "return")
        pieces = [_build(member, [_MARKER_IDS[t] for t in id_types])]
        for t in id_types:  # cut the built text at each marker, in order
            before, _, rest = pieces.pop().partition(str(_MARKER_IDS[t]))
            pieces += [before, rest]
        shapes.append(_Shape(member, pieces[0], id_types, tuple(pieces[1:]), ":" in pieces[0]))
    return tuple(shapes)


@functools.cache
def _shared_head(redis_key: bool | None = None) -> str:
    """The text every shape (of one kind: Redis keys or AMQP names) begins with: 'ddm', 'ddm:', 'ddm.'."""
    return os.path.commonprefix([s.head for s in _shapes() if redis_key in (None, s.redis_key)])


def _ids_in(shape: _Shape, rest: str) -> list | None:
    """The ids `rest` would carry if it had `shape`, or None; a loose reading, checked by building."""
    if not rest.startswith(shape.head):
        return None
    rest, ids = rest[len(shape.head) :], []
    for i, (id_type, after) in enumerate(zip(shape.id_types, shape.after, strict=True)):
        last = i == len(shape.after) - 1
        text, rest = (rest.removesuffix(after), "") if last else rest.partition(after)[::2]
        try:
            ids.append(id_type(text))
        except ValueError:
            return None
    return ids if rest == "" else None


def _shape_of(rest: str) -> _Shape | None:
    """The shape that builds exactly `rest` on the empty prefix, ids valid, or None."""
    for shape in _shapes():
        ids = _ids_in(shape, rest)
        try:
            if ids is not None and _build(shape.member, ids) == rest:
                return shape
        except SchemaError:
            continue
    return None


@dataclass(frozen=True)
class NameOwner:
    """Who made a queue name or Redis key: the prefix, and the Names member ('job', 'expert_queue', ...)."""

    prefix: str
    member: str
    redis_key: bool


def name_owner(name: str) -> NameOwner | None:
    """The prefix and member that make `name`, or None when no prefix makes it.

    A prefix may hold ':' and '.', so one name can read two ways: 'a.ddm:worker:ddm:jobs' is prefix
    'a.' with worker id 'ddm:jobs', or prefix 'a.ddm:worker:' with its job index. Such a name belongs
    to the LONGEST prefix that reads it as one of our shapes, so every name has at most one owner and
    deleting one prefix never takes a name another prefix could claim: 'a.' never takes 'a.ddm:'s keys
    ('a.ddm:ddm:job:x' reads only as 'a.ddm:' + a job), nor 'ab.'s ('ab.ddm:jobs' does not begin with
    'a.' + a shape), and '' takes only names that begin with a shape. The price: a name of the shorter
    prefix whose id itself ends in a whole shape (a worker id 'ddm:jobs') is left to the longer one.
    """
    head = _shared_head()
    starts = [i for i in range(len(name)) if name.startswith(head, i)]
    for start in reversed(starts):  # the longest prefix first
        if PREFIX_RE.fullmatch(name[:start]):
            shape = _shape_of(name[start:])
            if shape is not None:
                return NameOwner(name[:start], shape.member, shape.redis_key)
    return None


def redis_key_pattern(prefix: str) -> str:
    """A SCAN MATCH pattern that every Redis key of `prefix` matches (keys of longer prefixes too: keep
    those whose name_owner is `prefix`). PREFIX_RE admits no glob character, so nothing needs escaping."""
    return f"{Names(prefix).prefix}{_shared_head(redis_key=True)}*"
