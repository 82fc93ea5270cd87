"""The one door for DDM_UI_TOKEN and the per-user API keys (keys.py): who a request is (a Principal),
whether it may read or act, and a per-address budget of wrong tokens and keys so neither can be guessed
quickly. Every HTTP route and Socket.IO event that needs a token or key asks here.

A token is needed once DDM_UI_TOKEN is set or any API key exists under the prefix (keys.py KeyStore.enabled).
DDM_UI_TOKEN is an admin key; an API key is its user with its scope (read < submit < admin): a scope too
small for the action is refused with 403 (forbidden), a wrong, malformed or revoked key with 401.

What stays open without a token: the page (`/`), its static files, `/healthz` and `/api/config` (the
serving deployment as the page draws its form, and whether a token is needed) - so a person can load the
page and type the token, and a health check needs none. Everything that shows jobs, results, workers or
acts on them needs it.

A wrong token counts against its client address, on every path (HTTP, connect, watch, submit, cancel):
at most `failures_per_minute` a minute, the same number as the submit budget (DDM_UI_JOBS_PER_MINUTE);
past it the address is refused (rate_limited) without the token being looked at, right or wrong, until
the window frees a place. The budget is the address's, not a socket's: reconnecting does not reset it.
A request with no token guesses nothing and is not counted (a page without its token yet must not lock
itself out).
"""

from __future__ import annotations

import hmac
import math

from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.webui.jobs import SubmitError
from ddm.webui.keys import OPEN, TOKEN_ADMIN, KeyStore, Principal
from ddm.webui.rate_limit import RateLimiter


class Access:
    def __init__(self, token: str, failures_per_minute: int, keys: KeyStore | None = None):
        self._token = token
        self.keys = keys
        self.failures = RateLimiter(failures_per_minute)

    @property
    def required(self) -> bool:
        """Whether a request needs a token or key (DDM_UI_TOKEN set, or keys on: one Redis read)."""
        return bool(self._token) or (self.keys is not None and self.keys.enabled())

    def identify(self, token: str | None) -> Principal | None:
        """Who `token` is (DDM_UI_TOKEN: an admin; an API key: its user), or None. Counts nothing."""
        if not token:
            return None
        if self._token and hmac.compare_digest(token.encode(), self._token.encode()):
            return TOKEN_ADMIN
        record = self.keys.verify(token) if self.keys is not None else None
        if record is None:
            return None
        return Principal(
            record.user, record.scope, record.key_id, False, record.rate_per_min, record.max_jobs
        )

    def allows(self, token: str | None) -> bool:
        """Whether `token` may read (always, when none is needed). Counts nothing: check() does."""
        return not self.required or self.identify(token) is not None

    def check(self, token: str | None, address: str, action: str, needed: str = "read") -> Principal:
        """Who may `action` ("read jobs", "watch jobs", ...) with `token`, needing scope `needed`; else
        SubmitError: unauthorized (no or a wrong token or key; a wrong one counts against `address`),
        rate_limited (`address` used its budget), forbidden (the key's scope is too small)."""
        if not self.required:
            return OPEN
        wait = self.failures.wait(address) if token else 0.0
        if wait:
            raise SubmitError(
                "rate_limited",
                f"too many wrong tokens: at most {self.failures.limit} per minute from one address "
                f"({address}); try again in {math.ceil(wait)} s",
                retry_after_s=wait,
            )
        try:
            who = self.identify(token)
        except REDIS_CONNECTION_ERRORS as exc:
            raise SubmitError("unavailable", f"cannot check the key: Redis unreachable: {exc}") from None
        if who is None:
            if token:
                self.failures.hit(address)  # the next wrong one may find the budget spent
            what = "a wrong token" if token else "no token"
            raise SubmitError(
                "unauthorized",
                f"this server needs an access token or API key to {action}, and the request carried {what}: "
                "enter the token you were given in the form (API: `Authorization: Bearer TOKEN`)",
            )
        if not who.may(needed):
            raise SubmitError(
                "forbidden", f"this API key's scope is {who.scope!r}; to {action} a key needs {needed!r}"
            )
        return who
