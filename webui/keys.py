"""Per-user API keys (issue 39 parts 2 and 3): the store in Redis (`ddm keys create | list | revoke`), and
who a request is (Principal) once access.py has checked its key.

Keys are on under a prefix once any key was created there (the names.api_keys set is not empty): from then
on nothing the UI shows is readable without a key or DDM_UI_TOKEN. A revoked key keeps its record (marked
revoked_at), so revoking the last key does not open the server. The records: schema/api_keys.py.

Who sees what (Principal.sees): an admin (an admin key, DDM_UI_TOKEN, or anyone while neither keys nor a
token are set) every job; any other key the jobs its user submitted (the job hash's `owner`), nothing else:
a job without an owner (submitted with no key, by the CLI, or before keys) is the admins'.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from ddm.client.errors import JobNotFoundError
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.api_keys import SALT_BYTES, ApiKeyRecord, scope_allows, split_key
from ddm.schema.errors import SchemaError, ServiceUnavailableError
from ddm.schema.jobs import JobHash
from ddm.schema.names import Names, check_key_id

# What an unknown key id is checked against, so that it costs what a known id with a wrong secret does
# (decoding a record, one salted hash): docs/BENCHMARKS.md, "API keys: answer times"
_DUMMY_RECORD = ApiKeyRecord("0" * 16, "nobody", "read", b"\0" * SALT_BYTES, b"\0" * 32).encode()


class Principal(NamedTuple):
    """Who a request is: `user` (None: DDM_UI_TOKEN, or an open server), its scope, its key id and the
    key's quotas."""

    user: str | None
    scope: str
    key_id: str | None = None
    open: bool = False  # no token and no keys were set when it came: it loses its rights once they are
    rate_per_min: int | None = None  # the key's quotas (quota.py; None: no limit)
    max_jobs: int | None = None

    @property
    def admin(self) -> bool:
        return self.scope == "admin"

    def may(self, needed: str) -> bool:
        return scope_allows(self.scope, needed)

    def sees(self, job: JobHash) -> bool:
        """Whether this principal may read, watch, fetch and cancel `job`."""
        return self.admin or (job.owner is not None and job.owner == self.user)

    @property
    def owner(self) -> str | None:
        """What the jobs it submits record as their owner (None: no key, nothing recorded)."""
        return self.user if self.key_id is not None else None


OPEN = Principal(None, "admin", open=True)  # no token and no keys: everyone, as before keys
TOKEN_ADMIN = Principal(None, "admin")  # DDM_UI_TOKEN: an admin key without a user


def not_yours(job_id: str) -> JobNotFoundError:
    """What a user hears of another's job and of no job alike, so job ids do not leak."""
    return JobNotFoundError(f"no job {job_id} of yours (never submitted with your key, or expired)")


def visible(who: Principal, client, job_id: str) -> JobHash:
    """The job hash of `job_id` if `who` may see it; else JobNotFoundError (for a non-admin the same words
    whether the job is another user's or does not exist)."""
    try:
        job = client.status(job_id)
    except JobNotFoundError:
        if who.admin:
            raise
        raise not_yours(job_id) from None
    if not who.sees(job):
        raise not_yours(job_id)
    return job


def redact(who: Principal, jobs: list[JobHash]) -> tuple[list[JobHash], dict[str, int] | None]:
    """(the jobs `who` may see, the others counted by status) - an admin: (all, None)."""
    if who.admin:
        return jobs, None
    mine = [j for j in jobs if who.sees(j)]
    others: dict[str, int] = {}
    for job in jobs:
        if not who.sees(job):
            others[job.status.value] = others.get(job.status.value, 0) + 1
    return mine, others


class KeyStore:
    """The API keys of one prefix, in Redis (schema/names.py api_key, api_keys)."""

    def __init__(self, redis, names: Names):
        self.redis = redis
        self.names = names

    def enabled(self) -> bool:
        """Whether keys are on under this prefix: any key was ever created (revoked ones count). Redis
        unreachable: on (closed), since nothing says they are off."""
        try:
            return bool(self.redis.exists(self.names.api_keys))
        except (*REDIS_CONNECTION_ERRORS, ServiceUnavailableError):
            return True

    def revoked(self, key_ids: set[str]) -> set[str]:
        """Those of `key_ids` that are revoked or gone (the sockets that connected with them are closed)."""
        return {k for k in key_ids if (record := self.get(k)) is None or record.revoked}

    def create(
        self, user: str, scope: str = "submit", rate_per_min: int | None = None, max_jobs: int | None = None
    ) -> tuple[ApiKeyRecord, str]:
        """A new key for `user`: (its record, the key to hand over, never stored); SchemaError: bad input."""
        record, key = ApiKeyRecord.create(user, scope, time.time(), rate_per_min, max_jobs)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.names.api_key(record.key_id), mapping=record.encode())
        pipe.sadd(self.names.api_keys, record.key_id)
        pipe.execute()
        return record, key

    def get(self, key_id: str) -> ApiKeyRecord | None:
        raw = self.redis.hgetall(self.names.api_key(key_id))
        return ApiKeyRecord.decode(key_id, raw) if raw else None

    def list(self) -> list[ApiKeyRecord]:
        """Every key's record, oldest first (revoked ones too)."""
        ids = sorted(_text(k) for k in self.redis.smembers(self.names.api_keys))
        records = [r for r in (self.get(k) for k in ids) if r is not None]
        return sorted(records, key=lambda r: (r.created_at or 0.0, r.key_id))

    def revoke(self, key_id: str) -> ApiKeyRecord:
        """Mark the key revoked (at once: every request looks its key up). SchemaError for an unknown id."""
        check_key_id(key_id)
        key = self.names.api_key(key_id)
        if not self.redis.exists(key):
            raise SchemaError(f"no API key {key_id} under prefix {self.names.prefix!r} (`ddm keys list`)")
        self.redis.hsetnx(key, "revoked_at", repr(time.time()))
        return self.get(key_id)

    def verify(self, key: str) -> ApiKeyRecord | None:
        """The live record whose secret `key` carries, or None (malformed, unknown, wrong or revoked). An
        unknown id still costs a record's decoding and one hash, so a wrong id and a wrong secret take the
        same time."""
        parts = split_key(key)
        if parts is None:
            return None
        key_id, secret = parts
        record = self.get(key_id)
        if record is None:
            ApiKeyRecord.decode(key_id, _DUMMY_RECORD).matches(secret)
            return None
        if not record.matches(secret) or record.revoked:
            return None
        return record


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
