"""What the router knows about each expert, pure (a clock passed in): is anyone serving it, is it
making progress, how far away is it, and how many requests should be in flight to keep it busy.

Fed by the glue (router/worker.py) from two sources:
    observe(consumers, depth, heartbeats, served)   every OBSERVE_S: the queue's consumer count and ready
                        depth (a passive declare), its workers' live heartbeats and their forward passes
    replied(round_trip_ms, compute_ms, worker, sent_at, rows)   every reply

Rules (docs/PROTOCOL.md section 6; for operators docs/DEPLOY.md section 12):
- absent: no consumer on its queue; or consumers, our requests waiting, every heartbeat expired, no
  progress and no change in its queue's depth for SILENT_S (a host cut off whose TCP connection the
  broker has not noticed yet). Heartbeats count only when the glue trusts them: not until Redis has
  been back from an outage long enough for every worker to beat again. A live consumer with a draining
  or growing queue is busy, never absent, whatever its heartbeat says.
- gone: absent without a break for loss_grace_s (a broker failover, when consumers move to another
  node, or a Redis outage shorter than that changes nothing). gone_since is when the absence began.
  While absent but not gone, its requests wait in its queue and every plan still counts on it.
- progressing: a reply came, the queue's depth went down or its workers' forward passes went up,
  within the last `stall_s`. A backlogged expert that drains is busy, not dead (its backlog may sit in
  the workers' prefetch buffers, where the depth does not see it: hence the forward passes).
- overtaken: a request sent after this one was answered. The queue is first in, first out, so this one
  is lost (or held by a stuck replica): resend it.
- link: the smallest recent (round trip - compute) (queueing only ever adds to a round trip, so the
  minimum is the wire); far: measured, and the link longer than a local broker's (LOCAL_LINK_MS).
- window: requests in flight allowed. A local link keeps one per replica, so every row that falls due
  meanwhile rides one batch. A far expert's rows go in staggered cohorts instead, one request each,
  released one estimated forward pass apart, so one cohort computes while the others cross the link
  (rows due together would otherwise ride one request, and the expert idle for the whole round trip:
  lock step); its window is MAX_COHORTS per replica, the bound on what a bad estimate can queue.
  m cohorts keep it busy when the others' compute covers one's round trip, (m - 1) / m x C >= link +
  LOCAL_LINK_MS, C the compute of all the rows it serves: the smallest such m (fewest, so the largest
  batches), or as many as the window when even that cannot hide the link. Compute is modelled per
  row, a moving average (linear: right on a CPU, pessimistic for a GPU's nearly flat cost, which only
  means fewer, larger cohorts). docs/BENCHMARKS.md measures it.
- hedge: a request unanswered after the recent p99 round trip (at least a floor) may be sent once
  more to a replica that answered recently, and after each further such period to one more; a token
  bucket caps hedges at a fraction of requests.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

LINK_SAMPLES = 32  # round trips the link estimate's minimum runs over (a few steps of one job)
LATENCY_SAMPLES = 200  # round trips the hedging p99 runs over
MIN_P99_SAMPLES = 20  # no hedging before this many round trips: no p99 to compare with yet
# What a round trip through a broker on the same host or LAN costs anyway (encoding, the broker both
# ways, the router's own loop: 1-3 ms here, docs/BENCHMARKS.md, and several more when the router is
# busy on two loaded cores). A link no longer than this keeps one request in flight per replica:
# pipelining over it gains less than splitting the batch loses.
LOCAL_LINK_MS = 10.0
COMPUTE_EWMA = 0.2
MAX_COHORTS = 8  # a far expert's window per replica: staggered cohorts in flight, at most
# Expired heartbeats alone do not make an expert gone while it still answers: a worker may write none
# (PROTOCOL.md section 8), or reach the broker but not Redis. Gone by heartbeats = expired and silent
# for this long.
SILENT_S = 5.0
HEDGE_BURST = 4.0  # hedges allowed back to back before the fraction cap applies


@dataclass
class ExpertHealth:
    expert: int
    stall_s: float  # no progress for this long while requests wait: the expert is stuck
    hedge_floor_ms: float = 250.0
    hedge_max_fraction: float = 0.05
    loss_grace_s: float = 10.0  # absent this long without a break: gone
    consumers: int = 1  # before the first observation: assume someone serves (as before this existed)
    depth: int = 0
    heartbeats: int | None = None  # live heartbeat records of its workers; None: none ever seen
    depth_moved: float = float("-inf")  # when its queue's depth last changed
    absent_since: float | None = None  # when it began to look absent (None: it does not)
    gone_since: float | None = None
    live_since: float = float("-inf")  # when it last came back (a request sent before waited it out)
    last_progress: float = 0.0
    served: int | None = None  # forward passes of its live workers, from their heartbeats
    seen: bool = False  # an observation has found a live consumer since this router started
    answered_through: float = float("-inf")  # the latest send time of a request answered
    row_ms: float | None = None  # forward pass per row (moving average): the cohorts' cost model
    _links: deque = field(default_factory=lambda: deque(maxlen=LINK_SAMPLES))
    _round_trips: deque = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLES))
    _replied_at: dict[str, float] = field(default_factory=dict)  # worker id -> its last reply
    _hedge_tokens: float = HEDGE_BURST

    # ------------------------------------------------------------ observations

    def observe(
        self,
        now: float,
        consumers: int,
        depth: int,
        heartbeats: int | None,
        served: int | None,
        *,
        waiting: bool = True,
        beats_trusted: bool = True,
    ) -> bool:
        """Record one look at the queue and the heartbeats; True if the expert was just judged gone or
        just came back (the scheduler re-plans or resumes what waited on it). waiting: requests of ours
        wait for it; beats_trusted: False while Redis has not been back long enough for a beat."""
        if depth != self.depth:
            self.depth_moved = now  # growing or draining: someone feeds it or works through it
        if depth < self.depth or (served is not None and self.served is not None and served > self.served):
            self.last_progress = now  # someone is working through it
        self.consumers, self.depth = consumers, depth
        if beats_trusted:
            self.served = served
            if heartbeats:
                self.heartbeats = heartbeats
            elif self.heartbeats is not None:
                self.heartbeats = 0  # it had heartbeats and they all expired
        was_live = self.gone_since is None
        silent = (
            beats_trusted
            and (waiting or not was_live)  # once gone, it stays gone until it shows life again
            and self.heartbeats == 0
            and now - self.depth_moved >= SILENT_S
            and not self.progressed_within(now, SILENT_S)
        )
        if consumers > 0 and not silent:
            self.seen = True
            self.absent_since = None
            if not was_live:
                self.gone_since = None
                self.last_progress = self.live_since = now  # a fresh replica: a fresh stall clock
        else:
            self.absent_since = now if self.absent_since is None else self.absent_since
            if was_live and now - self.absent_since >= self.loss_grace_s:
                self.gone_since = self.absent_since
        return self.live != was_live

    def rejudge(self, now: float) -> None:
        """Forget how long it has looked absent (after the router's own broker failover: consumers are
        moving to other nodes too). A gone expert stays gone until an observation finds it back."""
        self.absent_since = None if self.gone_since is None else self.absent_since
        self.last_progress = max(self.last_progress, now)

    def replied(
        self,
        now: float,
        round_trip_ms: float,
        compute_ms: float,
        worker: str,
        sent_at: float,
        *,
        timed: bool,
        rows: int = 1,
    ) -> None:
        """A reply from `worker` to a request of `rows` rows. Only a `timed` one (sent once, to a live
        expert) feeds the link and p99 estimates: a resent, hedged or long-queued request would skew
        them for hundreds of replies."""
        self.last_progress = now
        self.answered_through = max(self.answered_through, sent_at)
        self._replied_at[worker] = now
        if not timed:
            return
        self._links.append(max(0.0, round_trip_ms - compute_ms))
        self._round_trips.append(round_trip_ms)
        row_ms = max(compute_ms, 0.1) / max(1, rows)
        self.row_ms = (
            row_ms if self.row_ms is None else (1 - COMPUTE_EWMA) * self.row_ms + COMPUTE_EWMA * row_ms
        )

    def sent(self) -> None:
        """One request sent: earns a fraction of a hedge."""
        self._hedge_tokens = min(HEDGE_BURST, self._hedge_tokens + self.hedge_max_fraction)

    # ------------------------------------------------------------ judgements

    @property
    def live(self) -> bool:
        return self.gone_since is None

    @property
    def absent(self) -> bool:
        """Looks absent (no consumer, or silent), gone or not yet."""
        return self.absent_since is not None

    def gone_for(self, now: float) -> float:
        return 0.0 if self.gone_since is None else now - self.gone_since

    def stalled(self, now: float, waiting_since: float) -> bool:
        """No progress for stall_s, counted from when the request began waiting at the latest."""
        return now - max(self.last_progress, waiting_since) > self.stall_s

    def progressed_within(self, now: float, seconds: float) -> bool:
        return now - self.last_progress < seconds

    def overtook(self, sent_at: float) -> bool:
        """A request sent after `sent_at` was answered."""
        return self.answered_through > sent_at

    @property
    def link_ms(self) -> float | None:
        return min(self._links) if self._links else None

    @property
    def far(self) -> bool:
        """Measured, and farther than a local broker: its rows go in staggered cohorts."""
        return self.link_ms is not None and self.row_ms is not None and self.link_ms > LOCAL_LINK_MS

    def pass_ms(self, rows: int) -> float:
        """Estimated forward pass over `rows` rows (0 before any reply)."""
        return (self.row_ms or 0.0) * rows

    def cohorts(self, rows: int) -> int:
        """How many staggered cohorts `rows` rows (all it serves now) are split into (module docstring)."""
        if not self.far or rows <= 1:
            return 1
        total, link = self.pass_ms(rows), self.link_ms + LOCAL_LINK_MS
        most = min(rows, self.window())
        if total <= link:
            return most
        return max(1, min(most, math.ceil(round(total / (total - link), 6))))

    def window(self) -> int:
        """Requests in flight allowed: one per replica, MAX_COHORTS per replica for a far expert."""
        return max(1, self.consumers) * (MAX_COHORTS if self.far else 1)

    def p99_ms(self) -> float | None:
        if len(self._round_trips) < MIN_P99_SAMPLES:
            return None
        ordered = sorted(self._round_trips)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]

    def hedge_target(self, now: float, sent_at: float, exclude=()) -> str | None:
        """The worker to hedge a request sent at `sent_at` to (not one in `exclude`), or None: not late
        enough, no second replica, no budget. A replica that answered since the request left is alive
        and is not the one holding it, so it comes first; else the one that answered last (with no other
        traffic that may be the holder itself: the next late period tries another). Spends a token."""
        if self.hedge_max_fraction <= 0 or self.consumers < 2 or self._hedge_tokens < 1.0:
            return None
        p99 = self.p99_ms()
        late_ms = (now - sent_at) * 1000.0 / (1 + len(exclude))  # the n-th hedge after n late periods
        if p99 is None or late_ms < max(p99, self.hedge_floor_ms):
            return None
        recent = [(t, w) for w, t in self._replied_at.items() if w not in exclude and now - t < self.stall_s]
        if not recent:
            return None
        since = [(t, w) for t, w in recent if t > sent_at]
        self._hedge_tokens -= 1.0
        return max(since or recent)[1]
