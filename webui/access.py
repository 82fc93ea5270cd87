"""The one door for DDM_UI_TOKEN: whether a request may read or act, and a per-address budget of wrong
tokens so the token cannot be guessed quickly. Every HTTP route and Socket.IO event that needs the token
asks here (a later per-user key check replaces this class, nothing else).

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

from ddm.webui.jobs import SubmitError
from ddm.webui.rate_limit import RateLimiter


class Access:
    def __init__(self, token: str, failures_per_minute: int):
        self._token = token
        self.failures = RateLimiter(failures_per_minute)

    @property
    def required(self) -> bool:
        return bool(self._token)

    def allows(self, token: str | None) -> bool:
        """Whether `token` is the server's (always, when it has none). Counts nothing: check() does."""
        return not self._token or hmac.compare_digest((token or "").encode(), self._token.encode())

    def check(self, token: str | None, address: str, action: str) -> None:
        """SubmitError unless `token` may `action` ("read jobs", "watch jobs", ...): unauthorized (no or a
        wrong token; a wrong one counts against `address`), rate_limited (`address` used its budget)."""
        if not self._token:
            return
        wait = self.failures.wait(address) if token else 0.0
        if wait:
            raise SubmitError(
                "rate_limited",
                f"too many wrong tokens: at most {self.failures.limit} per minute from one address "
                f"({address}); try again in {math.ceil(wait)} s",
                retry_after_s=wait,
            )
        if self.allows(token):
            return
        if token:
            self.failures.hit(address)  # the next wrong one may find the budget spent
        what = "a wrong token" if token else "no token"
        raise SubmitError(
            "unauthorized",
            f"this server needs an access token to {action}, and the request carried {what}: "
            "enter the token you were given in the form (API: `Authorization: Bearer TOKEN`)",
        )
