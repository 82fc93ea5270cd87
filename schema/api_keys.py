"""The web UI's API keys (issue 39): the key's text, the stored record and the secret's salted hash.

    names.api_key(key_id)  hash  ApiKeyRecord: user, scope, rate_per_min, max_jobs, salt, digest,
                                 iterations, created_at, revoked_at (all values strings)
    names.api_keys         set   every key id ever created under the prefix, revoked ones too

A key, as its user gets it (once): "<key_id>.<secret>", the id 16 hex digits (public: it names the
record), the secret secrets.token_urlsafe(32) (256 random bits). Redis keeps only
pbkdf2_hmac(sha256, secret, salt, iterations), the salt 16 random bytes of the key's own: a key is looked
up by its id and its secret compared with hmac.compare_digest. The iterations are few on purpose: the
secret is random, not a password, so a stolen record cannot be brute-forced whatever the count, and
every request pays it. Writer: webui/keys.py KeyStore (`ddm keys`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from .errors import SchemaError, expected
from .names import KEY_ID_RE, check_key_id

SCOPES = ("read", "submit", "admin")  # each allows what the ones before it do
USER_RE = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
SECRET_RE = re.compile(r"[A-Za-z0-9_-]{43}")  # token_urlsafe(32)
KEY_ID_BYTES = 8
SECRET_BYTES = 32
SALT_BYTES = 16
ITERATIONS = 2000
MAX_RATE = 1_000_000
MAX_JOBS = 10_000  # each submit of the key scans its active jobs inside Redis (webui/quota.py)


def check_user(user: object) -> str:
    """A user name: 1..64 chars of [A-Za-z0-9_.@-], else SchemaError."""
    if not isinstance(user, str) or not USER_RE.fullmatch(user):
        raise SchemaError(expected("a user name of 1..64 chars [A-Za-z0-9_.@-]", user))
    return user


def check_scope(scope: object) -> str:
    if scope not in SCOPES:
        raise SchemaError(expected(f"a scope in {list(SCOPES)}", scope))
    return scope


def scope_allows(scope: str, needed: str) -> bool:
    """Whether a key of `scope` may do what `needed` needs (read < submit < admin)."""
    return SCOPES.index(scope) >= SCOPES.index(needed)


def new_key() -> tuple[str, str]:
    """(key_id, secret), both random."""
    return secrets.token_hex(KEY_ID_BYTES), secrets.token_urlsafe(SECRET_BYTES)


def split_key(key: str) -> tuple[str, str] | None:
    """'<key_id>.<secret>' -> (key_id, secret); None for any other text (no lookup is worth making)."""
    key_id, dot, secret = key.partition(".")
    if not dot or not KEY_ID_RE.fullmatch(key_id) or not SECRET_RE.fullmatch(secret):
        return None
    return key_id, secret


def hash_secret(secret: str, salt: bytes, iterations: int = ITERATIONS) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, iterations)


@dataclass(frozen=True)
class ApiKeyRecord:
    """One key's record: who it is, what it may do, its quotas (rate_per_min: jobs a minute, max_jobs:
    jobs queued or running at once, enforced by webui/quota.py; None: none), and the salted hash of its
    secret."""

    key_id: str
    user: str
    scope: str
    salt: bytes
    digest: bytes
    iterations: int = ITERATIONS
    rate_per_min: int | None = None
    max_jobs: int | None = None
    created_at: float | None = None
    revoked_at: float | None = None

    @classmethod
    def create(
        cls, user: str, scope: str, now: float, rate_per_min: int | None = None, max_jobs: int | None = None
    ) -> tuple[ApiKeyRecord, str]:
        """A new record and the key to hand its user (shown once, never stored)."""
        check_user(user)
        check_scope(scope)
        for name, value, hi in (("rate_per_min", rate_per_min, MAX_RATE), ("max_jobs", max_jobs, MAX_JOBS)):
            if value is not None and (type(value) is not int or not 1 <= value <= hi):
                raise SchemaError(f"{name}: {expected(f'an integer in 1..{hi}', value)}")
        key_id, secret = new_key()
        salt = secrets.token_bytes(SALT_BYTES)
        digest = hash_secret(secret, salt)
        record = cls(key_id, user, scope, salt, digest, ITERATIONS, rate_per_min, max_jobs, now)
        return record, f"{key_id}.{secret}"

    def matches(self, secret: str) -> bool:
        """Whether `secret` is this key's (constant time in the digest)."""
        return hmac.compare_digest(hash_secret(secret, self.salt, self.iterations), self.digest)

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def public(self) -> dict[str, Any]:
        """What `ddm keys list` shows: everything but the salt and the digest."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del out["salt"], out["digest"]
        return out

    def encode(self) -> dict[str, str]:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "key_id" or value is None:
                continue
            if isinstance(value, bytes):
                out[f.name] = value.hex()
            else:
                out[f.name] = repr(value) if isinstance(value, float) else str(value)
        return out

    @classmethod
    def decode(cls, key_id: str, raw: dict) -> ApiKeyRecord:
        """The hash as Redis returns it -> ApiKeyRecord; SchemaError naming the key and field otherwise."""
        check_key_id(key_id)
        fields = {_text(k): _text(v) for k, v in raw.items()}
        known = {f.name for f in dataclasses.fields(cls)} - {"key_id"}
        unknown = sorted(set(fields) - known)
        missing = sorted({"user", "scope", "salt", "digest"} - set(fields))
        if unknown or missing:
            raise SchemaError(f"API key {key_id}: " + expected(f"fields {sorted(known)}", sorted(fields)))
        try:
            return cls(
                key_id=key_id,
                user=check_user(fields["user"]),
                scope=check_scope(fields["scope"]),
                salt=bytes.fromhex(fields["salt"]),
                digest=bytes.fromhex(fields["digest"]),
                iterations=_int(fields.get("iterations", str(ITERATIONS))),
                rate_per_min=_int(fields["rate_per_min"]) if "rate_per_min" in fields else None,
                max_jobs=_int(fields["max_jobs"]) if "max_jobs" in fields else None,
                created_at=float(fields["created_at"]) if "created_at" in fields else None,
                revoked_at=float(fields["revoked_at"]) if "revoked_at" in fields else None,
            )
        except ValueError as exc:
            raise SchemaError(f"API key {key_id}: {exc}") from None


def _int(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_RATE:
        raise SchemaError(expected(f"an integer in 1..{MAX_RATE}", text))
    return int(text)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
