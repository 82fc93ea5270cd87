"""Who may watch: the token (when DDM_UI_TOKEN is set, access.py), watch requests per socket per minute,
and sockets watching at once per client address. A refusal is a SubmitError with its own kind
(too_many_watches, unauthorized, rate_limited), answered through the watch event's acknowledgement.

Every watch request counts against its socket's watch budget, refused ones too: each accepted one costs
a replay of the job. A socket's watch budget is forgotten when it disconnects; a wrong token counts
against its address's budget of wrong tokens (access.py), which is not.
"""

from __future__ import annotations

import math

from ddm.webui.jobs import SubmitError
from ddm.webui.rate_limit import RateLimiter


class WatchGate:
    def __init__(self, *, per_minute: int, per_address: int, access):
        self.per_minute = per_minute
        self.per_address = per_address
        self.access = access  # webui.access.Access
        self._rate = RateLimiter(per_minute)

    def admit(self, sid: str, token: str | None, address: str, authenticated=None):
        """Count one watch request of socket `sid` from `address`; SubmitError when over its budget or
        unauthorized. `authenticated`: who the socket connected as (keys.py Principal, events.py), so a
        request without a token of its own may watch as that. Returns who watches (its token's, else the
        socket's)."""
        wait = self._rate.hit(sid)
        if wait is not None:
            raise SubmitError(
                "too_many_watches",
                f"too many watch requests: at most {self.per_minute} per minute from one connection "
                f"(each replays the job); try again in {math.ceil(wait)} s",
                retry_after_s=wait,
            )
        if token is not None or not authenticated:
            return self.access.check(token, address, "watch jobs")
        return authenticated

    def check_address(self, address: str, watching: int) -> None:
        """`watching`: sockets of `address` watching now, not counting the one asking."""
        if watching >= self.per_address:
            raise SubmitError(
                "too_many_watches",
                f"too many viewers: at most {self.per_address} connections from one address "
                f"({address}) may watch jobs at once; close a tab, or stop watching in one",
            )

    def forget(self, sid: str) -> None:
        self._rate.forget(sid)
