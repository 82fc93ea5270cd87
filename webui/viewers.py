"""The state TailHub keeps: one Tailer per watched job, one Viewer per watching socket.

A viewer is either live (in the job's room: it gets each new step as the tailer emits it, encoded once
for the whole room) or catching up (out of the room: the Replayer sends it the steps after `last_id`
from the stream, at the pace its connection takes them, then moves it into the room under the
tailer's lock). Nothing here outlives the socket: unwatching removes the viewer, the last viewer
leaving removes the tailer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

START_ID = b"0-0"


def room(job_id: str) -> str:
    return f"job:{job_id}"


def stream_id(entry_id: bytes | str) -> tuple[int, int]:
    """A stream entry id b'1700000000000-3' as (ms, seq), to compare ids."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def after(entry_id: bytes) -> bytes:
    """The smallest id above `entry_id` (XRANGE's exclusive start, spelled for any Redis)."""
    ms, seq = stream_id(entry_id)
    return f"{ms}-{seq + 1}".encode()


@dataclass(eq=False)
class Viewer:
    """One socket watching one job. Fields change under its tailer's lock, or on the Replayer's thread
    while the viewer is catching up (then nothing else touches them)."""

    sid: str
    address: str
    tailer: Tailer
    last_id: bytes = START_ID  # last stream entry this viewer was sent (by replay or the room)
    last_step: int = 0
    live: bool = False
    gone: bool = False  # unwatched: the Replayer forgets it
    sent: dict[str, Any] | None = None  # the last "job" payload this viewer was sent
    stride: int = 1  # replay: pixels on every stride-th step (REPLAY_PIXEL_BUDGET)
    replayed: int = 0  # steps sent by the current replay
    stalled_since: float | None = None  # the Replayer has waited on its backlog since then


@dataclass(eq=False)
class Tailer:
    """One watched job. Fields below `lock` change only while it is held."""

    job_id: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    viewers: set[Viewer] = field(default_factory=set)  # live and catching up
    last_id: bytes = START_ID  # last stream entry the reader has seen (and emitted to the room)
    last_step: int = 0
    n: int = 0  # images per frame (0: unknown yet)
    steps: int | None = None
    status: dict[str, Any] | None = None  # last "job" payload emitted to the room
    finished: bool = False  # final status emitted; the reader no longer reads this job
    next_status: float = 0.0  # monotonic time of the next job-hash read

    @property
    def room(self) -> str:
        return room(self.job_id)

    def live(self) -> list[Viewer]:
        return [v for v in self.viewers if v.live]


def status_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether a viewer that was sent `old` needs `new` (a status, error, start time or a queued job's
    place differs)."""
    return old is None or any(old.get(k) != new.get(k) for k in ("status", "error", "started_at", "queue"))
