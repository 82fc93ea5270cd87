"""Redis -> browsers: one tailer per watched job, shared by all its viewers, emitting to a room per job.

    hub.watch(sid, job_id)   # replays the steps the room has already seen to sid, then sid joins the room
    hub.unwatch(sid)         # the last viewer leaving stops the job's tailer

A tailer thread follows the job's trajectory stream with XREAD BLOCK and emits each new step once to
the room `job:<id>`. Ordering without duplicates, for a viewer that joins at any time: the tailer emits
under its lock and remembers the last stream id it emitted; a joining viewer, under the same lock,
gets everything up to that id replayed (XRANGE) and only then enters the room, so what it receives is
exactly steps 1..k from the replay followed by k+1.. live. A router that resumes a job may rewrite the
step it resumed at; steps not above the last one sent are skipped, as Client.frames does.

Events (server -> browser): "job" (status payload: on watch, on every status change, and last when the
job is done/failed/expired), "frame" (payloads.frame_payload; "pixels" may be null in a long replay).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from ddm.router.client import JobNotFoundError, read_stream
from ddm.schema.jobs import decode_traj_entry
from ddm.schema.messages import Frame
from ddm.schema.names import check_job_id
from ddm.webui.payloads import frame_payload, job_payload
from ddm.workers.redis_conn import REDIS_CONNECTION_ERRORS

log = logging.getLogger(__name__)

BLOCK_MS = 1000  # longest XREAD BLOCK before the tailer looks at the job hash again
STATUS_EVERY_S = 0.5  # how often a tailer re-reads the job hash while frames flow
REPLAY_PIXEL_BUDGET = 4096  # images (frames x n) a replay sends with pixels; beyond, every k-th frame
NAMESPACE = "/"


def room(job_id: str) -> str:
    return f"job:{job_id}"


class Tailer:
    """The state of one job's tailer. Fields below `lock` change only while it is held."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        self.room = room(job_id)
        self.lock = threading.Lock()
        self.viewers: set[str] = set()
        self.last_id: bytes = b"0-0"  # last stream entry emitted to the room
        self.last_step = 0
        self.status: dict[str, Any] | None = None  # last "job" payload emitted to the room
        self.finished = False  # terminal status emitted; the thread has ended
        self.stopped = False  # no viewers left: emit nothing more


class TailHub:
    def __init__(self, socketio, client, *, block_ms: int = BLOCK_MS):
        self.socketio = socketio
        self.client = client  # ddm.router.client.Client: status() and its redis connection
        self.names = client.names
        self.max_bytes = client.settings.max_message_bytes
        self.block_ms = block_ms
        self.lock = threading.Lock()
        self.tailers: dict[str, Tailer] = {}
        self.watching: dict[str, str] = {}  # sid -> job_id
        self._closed = False

    # ------------------------------------------------------------ viewers

    def watch(self, sid: str, job_id: str) -> dict[str, Any]:
        """Make `sid` a viewer of `job_id` (it stops watching any other job). Returns the job payload.

        Raises SchemaError for a malformed id, JobNotFoundError for an unknown or expired job.
        """
        check_job_id(job_id)
        status = job_payload(self.client.status(job_id))
        self.unwatch(sid)
        with self.lock:
            tailer = self.tailers.get(job_id)
            start = tailer is None
            if start:
                tailer = self.tailers[job_id] = Tailer(job_id)
            with tailer.lock:
                tailer.viewers.add(sid)
            self.watching[sid] = job_id
        with tailer.lock:
            if sid not in tailer.viewers:  # unwatched (disconnected) meanwhile
                return status
            current = tailer.status or status
            self._emit("job", current, to=sid)
            self._replay(sid, tailer)
            self.socketio.server.enter_room(sid, tailer.room, namespace=NAMESPACE)
            if tailer.finished and tailer.status is not None and tailer.status is not current:
                self._emit("job", tailer.status, to=sid)
        if start:
            self.socketio.start_background_task(self._run, tailer)
        return current

    def unwatch(self, sid: str) -> None:
        with self.lock:
            job_id = self.watching.pop(sid, None)
            tailer = self.tailers.get(job_id) if job_id else None
            if tailer is None:
                return
            with tailer.lock:
                tailer.viewers.discard(sid)
                self.socketio.server.leave_room(sid, tailer.room, namespace=NAMESPACE)
                if not tailer.viewers:
                    tailer.stopped = True
                    del self.tailers[job_id]

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {"tailers": len(self.tailers), "viewers": len(self.watching)}

    def close(self) -> None:
        with self.lock:
            self._closed = True
            for tailer in self.tailers.values():
                with tailer.lock:
                    tailer.stopped = True
            self.tailers.clear()
            self.watching.clear()

    # ------------------------------------------------------------ internals

    def _emit(self, event: str, data: dict, *, to: str) -> None:
        self.socketio.emit(event, data, to=to, namespace=NAMESPACE)

    def _decode(self, job_id: str, fields: dict) -> Frame | None:
        try:
            return decode_traj_entry(job_id, fields, max_bytes=self.max_bytes)
        except Exception as exc:  # noqa: BLE001 - a bad entry must not end the stream for everyone
            log.warning("job %s: skipping an undecodable trajectory entry: %s", job_id, exc)
            return None

    def _replay(self, sid: str, tailer: Tailer) -> None:
        """Send `sid` every step the room has been sent (called with tailer.lock held)."""
        if tailer.last_id == b"0-0":
            return
        entries = self.client.redis.xrange(self.names.traj(tailer.job_id), "-", tailer.last_id)
        frames, last = [], 0
        for _, fields in entries:
            frame = self._decode(tailer.job_id, fields)
            if frame is not None and frame.step > last:
                frames.append(frame)
                last = frame.step
        if not frames:
            return
        images = len(frames) * frames[0].x.shape[0]
        stride = max(1, math.ceil(images / REPLAY_PIXEL_BUDGET))
        for i, frame in enumerate(frames):
            payload = frame_payload(frame)
            if stride > 1 and i % stride and i != len(frames) - 1:
                payload["pixels"] = None  # the strip still gets every step; pictures every k-th
            self._emit("frame", payload, to=sid)

    def _xread(self, tailer: Tailer, block_ms: int | None) -> list:
        stream = self.names.traj(tailer.job_id)
        return read_stream(self.client.redis, stream, tailer.last_id, count=128, block_ms=block_ms)

    def _emit_entries(self, tailer: Tailer, entries: list) -> None:
        with tailer.lock:
            if tailer.stopped:
                return
            for entry_id, fields in entries:
                tailer.last_id = entry_id
                frame = self._decode(tailer.job_id, fields)
                if frame is None or frame.step <= tailer.last_step:
                    continue
                tailer.last_step = frame.step
                self._emit("frame", frame_payload(frame), to=tailer.room)

    def _emit_status(self, tailer: Tailer, payload: dict, *, final: bool = False) -> None:
        with tailer.lock:
            if tailer.stopped:
                return
            changed = tailer.status is None or any(
                tailer.status.get(k) != payload.get(k) for k in ("status", "error", "started_at")
            )
            tailer.status = payload
            if changed or final:
                self._emit("job", payload, to=tailer.room)
            if final:
                tailer.finished = True

    def _run(self, tailer: Tailer) -> None:
        """The tailer thread: follow the stream until the job is terminal and drained, or no one watches."""
        next_status = 0.0
        steps = None
        while not tailer.stopped and not self._closed:
            try:
                near_end = steps is not None and tailer.last_step >= steps
                entries = self._xread(tailer, 100 if near_end else self.block_ms)
                if entries:
                    self._emit_entries(tailer, entries)
                if time.monotonic() < next_status and not near_end and entries:
                    continue
                next_status = time.monotonic() + STATUS_EVERY_S
                try:
                    payload = job_payload(self.client.status(tailer.job_id))
                except JobNotFoundError:
                    expired = {"job_id": tailer.job_id, "status": "expired"}
                    expired["error"] = "the job is no longer in Redis (it expired or was deleted)"
                    self._emit_status(tailer, expired, final=True)
                    return
                steps = payload.get("steps")
                if payload["status"] in ("done", "failed"):
                    # frames are written before the final status: drain what is left, then say so
                    while not tailer.stopped and (entries := self._xread(tailer, None)):
                        self._emit_entries(tailer, entries)
                    self._emit_status(tailer, payload, final=True)
                    return
                self._emit_status(tailer, payload)
            except REDIS_CONNECTION_ERRORS as exc:
                log.warning(
                    "job %s: Redis unreachable while tailing (%s); retrying in 1 s", tailer.job_id, exc
                )
                time.sleep(1.0)
            except Exception:
                log.exception("job %s: tailer failed", tailer.job_id)
                failed = {"job_id": tailer.job_id, "status": "failed"}
                failed["error"] = "the web UI lost this job's trajectory (see the UI's log)"
                self._emit_status(tailer, failed, final=True)
                return
