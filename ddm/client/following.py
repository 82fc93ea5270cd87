"""Following a job from Redis: its frames as they land (XREAD BLOCK on its trajectory stream), waiting
for its end, and riding out a Redis outage meanwhile. Client (ddm/client/client.py) mixes this in."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ddm.client.errors import JobTimeoutError
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS, unavailable
from ddm.schema.errors import ServiceUnavailableError
from ddm.schema.jobs import JobHash, decode_traj_entry
from ddm.schema.messages import Frame, JobStatus
from ddm.schema.names import check_job_id

POLL_S = 0.5  # longest XREAD BLOCK before the job hash is looked at again (failure, expiry)
# Once the last step is stored no frame wakes a waiter again: the end (the status, after decoding for a
# latent job) is polled, first after this long, then twice as long each time up to ENDING_POLL_MAX_S.
ENDING_POLL_S = 0.002
ENDING_POLL_MAX_S = 0.05
REDIS_OUTAGE_S = 120.0  # how long following a job rides out a Redis that does not answer
OUTAGE_ERRORS = (ServiceUnavailableError, *REDIS_CONNECTION_ERRORS)


class _Outage:
    """Rides out a Redis outage while a job is followed (wait, frames): retry with bounded backoff;
    give up after REDIS_OUTAGE_S, or at the caller's deadline, with ServiceUnavailableError."""

    def __init__(self, url: str, deadline: float | None):
        self.url, self.deadline = url, deadline
        self.since: float | None = None
        self.delay = 0.1

    def wait(self, exc: Exception) -> None:
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        if now - self.since > REDIS_OUTAGE_S or (self.deadline is not None and now >= self.deadline):
            if isinstance(exc, ServiceUnavailableError):
                raise exc from None  # already says what did not answer: not inside itself again
            raise unavailable(self.url, exc) from None
        time.sleep(self.delay)
        self.delay = min(2.0, self.delay * 2)

    def clear(self) -> None:
        self.since, self.delay = None, 0.1


def _poll_s(deadline: float | None, timed_out: Callable[[], str]) -> float:
    """How long the next blocking read may wait: POLL_S, or less when the deadline is nearer;
    JobTimeoutError(timed_out()) once it has passed."""
    left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
    if left <= 0:
        raise JobTimeoutError(timed_out())
    return left


def read_stream(r, stream: str, last_id: bytes, *, count: int, block_ms: int | None) -> list:
    """[(entry id, fields), ...] after `last_id` (XREAD, blocking up to block_ms when given)."""
    reply = r.xread({stream: last_id}, count=count, block=block_ms)
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3
        return next(iter(reply.values()))[0]
    return reply[0][1]  # RESP2: [[stream, [(id, fields), ...]]]


def stream_end(r, stream: str) -> bytes:
    """The id of the stream's newest entry (b"0-0" while it has none): XREAD after it waits for new ones."""
    newest = r.xrevrange(stream, count=1)
    return newest[0][0] if newest else b"0-0"


class JobFollowing:
    """frames() and wait() for a class with `redis`, `settings`, `names` and `status(job_id)` (Client)."""

    def frames(self, job_id: str, follow: bool = True, timeout: float | None = None) -> Iterator[Frame]:
        """Frames of a job in step order: every stored one from the start, then (follow) new ones live.

        Stops after the frame with step == steps, or once the job has ended (done, failed, cancelled) and
        its stream is drained (a failed or cancelled job simply ends; `result` or `status` tell why). A
        step already yielded is not yielded again (a resumed router may rewrite the step it resumed at).
        With follow=False, yields what is stored and returns. Raises JobTimeoutError after `timeout`
        seconds in total.
        """
        check_job_id(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            yield from self._frames(job_id, follow, deadline, timeout)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(self.settings.redis_url, exc) from None

    def _frames(self, job_id: str, follow: bool, deadline: float | None, timeout: float | None):
        steps = self.status(job_id).steps
        stream = self.names.traj(job_id)
        last_id, last_step = b"0-0", 0
        outage = _Outage(self.settings.redis_url, deadline)
        while True:
            try:
                entries = self._next_entries(
                    job_id, stream, last_id, last_step, steps, follow, deadline, timeout
                )
            except OUTAGE_ERRORS as exc:
                outage.wait(exc)
                continue
            outage.clear()
            if entries is None:
                return
            for entry_id, fields in entries:
                last_id = entry_id
                frame = decode_traj_entry(job_id, fields, max_bytes=self.settings.max_message_bytes)
                if frame.step <= last_step:
                    continue
                last_step = frame.step
                yield frame
                if frame.step >= steps:
                    return

    def _next_entries(self, job_id, stream, last_id, last_step, steps, follow, deadline, timeout):
        """The stream entries after last_id, waiting for some when following; None when there are no
        more (not following, or the job ended and its stream is drained)."""
        entries = self._xread(stream, last_id, block_s=None)
        if entries:
            return entries
        if not follow:
            return None
        st = self.status(job_id)
        if st.status.terminal:
            return self._xread(stream, last_id, block_s=None) or None  # frames precede the status
        left = _poll_s(
            deadline,
            lambda: (
                f"job {job_id}: no frame after step {last_step}/{steps} within {timeout} s: " + _where(st)
            ),
        )
        return self._xread(stream, last_id, block_s=left)

    def _xread(self, stream: str, last_id: bytes, block_s: float | None) -> list:
        block = None if block_s is None else max(1, int(block_s * 1000))
        return read_stream(self.redis, stream, last_id, count=256, block_ms=block)

    def wait(self, job_id: str, timeout: float | None = None) -> JobHash:
        """Block until the job has ended (done, failed or cancelled); returns its job hash (does not
        raise for failed or cancelled). Wakes on every new frame (XREAD BLOCK on the stream); after the
        last one it polls the status briefly (ENDING_POLL_S, doubling), so it returns right after the
        job ends."""
        check_job_id(job_id)
        try:
            return self._wait(job_id, timeout)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(self.settings.redis_url, exc) from None

    def _wait(self, job_id: str, timeout: float | None) -> JobHash:
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = self.names.traj(job_id)
        # Frames are wake-ups, not data: only those after the stream's end as it is now. A concrete id,
        # read before the status: "$" would be resolved at each XREAD, after the status read, and miss
        # (then sleep out POLL_S over) a frame stored in between.
        last_id: bytes | None = None
        outage = _Outage(self.settings.redis_url, deadline)
        ending_poll = ENDING_POLL_S
        while True:
            try:
                if last_id is None:
                    last_id = stream_end(self.redis, stream)
                st = self.status(job_id)
                if st.status.terminal:
                    return st
                left = _poll_s(
                    deadline,
                    lambda st=st: f"job {job_id} not finished after {timeout} s: " + _where(st),
                )
                if st.steps and st.step >= st.steps:  # every frame is in: only the status is to come
                    time.sleep(min(left, ending_poll))
                    ending_poll = min(ENDING_POLL_MAX_S, 2 * ending_poll)
                    continue
                entries = self._xread(stream, last_id, block_s=left)
            except OUTAGE_ERRORS as exc:
                outage.wait(exc)
                continue
            outage.clear()
            if entries:
                last_id = entries[-1][0]


def _where(st: JobHash) -> str:
    """Where a job stands, for a wait that ran out: only a queued one asks whether a router runs."""
    if st.status is JobStatus.QUEUED:
        return "still queued, no router has taken it (is a router worker running? `ddm up`)"
    return f"{st.status.value} at step {st.step}/{st.steps}; it goes on (wait longer: a larger timeout)"
