"""Catching viewers up: one thread sends every viewer out of its job's room the steps it has not had, at
the pace its connection takes them, then moves it into the room.

A viewer starts here when it watches (replay from the first step) and comes back when its connection
falls behind the room (from the step it had). Each turn, for each such viewer: if its connection holds
more than half its backlog bound, wait (and disconnect it once it has taken nothing for stall_s);
otherwise read a chunk of its job's stream after its last entry (XRANGE, at most CHUNK_IMAGES images)
and send it, up to the bound. When it has every entry up to the tailer's last one, it enters the room
under the tailer's lock: steps up to there came from here, the next ones come from the room, so each
step arrives once, in order. One thread and one Redis connection at a time, however many viewers join.

A replay of more than REPLAY_PIXEL_BUDGET images sends pixels on every k-th step only (and on its last):
the page's strip still gets every step.
"""

from __future__ import annotations

import logging
import math
import threading
import time

from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.webui.backlog import NAMESPACE
from ddm.webui.viewers import Viewer, after, status_changed, stream_id

log = logging.getLogger(__name__)

REPLAY_PIXEL_BUDGET = 4096  # images (frames x n) a replay sends with pixels; beyond, every k-th frame
CHUNK_IMAGES = 256  # images one XRANGE reads (a 64-image job: 4 frames, 512 KiB of float16)
IDLE_S = 0.05  # how long the thread sleeps when no viewer could be sent anything


class Replayer:
    def __init__(self, hub, *, backlog_bytes: int, stall_s: float):
        self.hub = hub  # TailHub: emit, decode, drop, backlogs, client, names, socketio
        self.backlog_bytes = backlog_bytes
        self.stall_s = stall_s
        self._lock = threading.Lock()
        self._pending: set[Viewer] = set()
        self._wake = threading.Event()
        self._started = False
        self._closed = False

    def add(self, viewer: Viewer) -> None:
        with self._lock:
            if self._closed:
                return
            self._pending.add(viewer)
            start = not self._started
            self._started = True
        if start:
            self.hub.socketio.start_background_task(self._run)
        self._wake.set()

    def discard(self, viewer: Viewer) -> None:
        with self._lock:
            self._pending.discard(viewer)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pending.clear()
        self._wake.set()

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        while not self._closed:
            with self._lock:
                viewers = list(self._pending)
            progressed, stalled = False, []
            for viewer in viewers:
                try:
                    progressed |= self._turn(viewer, stalled)
                except REDIS_CONNECTION_ERRORS as exc:
                    log.warning("Redis unreachable while replaying job %s (%s)", viewer.tailer.job_id, exc)
                    time.sleep(1.0)
                except Exception:  # noqa: BLE001 - one viewer's trouble must not stop the others
                    log.exception("replaying job %s to %s failed", viewer.tailer.job_id, viewer.sid)
                    self.discard(viewer)
                    stalled.append((viewer, "its replay failed (see the log above)"))
            for viewer, why in stalled:
                self.hub.drop(viewer, why)
            if not progressed:
                self._wake.wait(IDLE_S)
                self._wake.clear()

    def _turn(self, viewer: Viewer, stalled: list) -> bool:
        """Send `viewer` what its connection has room for; True if something was sent or it went live."""
        if viewer.gone:
            self.discard(viewer)
            return False
        backlog = self.hub.backlogs.nbytes(viewer.sid)
        if backlog > self.backlog_bytes // 2:
            now = time.monotonic()
            viewer.stalled_since = viewer.stalled_since or now
            if now - viewer.stalled_since > self.stall_s:
                self.discard(viewer)
                why = f"took nothing for {self.stall_s:g} s with {backlog // 1024} KiB waiting"
                stalled.append((viewer, why))
            return False
        viewer.stalled_since = None
        tailer = viewer.tailer
        with tailer.lock:
            if viewer.gone:
                return False
            if stream_id(viewer.last_id) >= stream_id(tailer.last_id):
                self._go_live(viewer)
                return True
            upto, n = tailer.last_id, max(tailer.n, 1)
            if viewer.replayed == 0:
                images = max(1, tailer.last_step - viewer.last_step) * n
                viewer.stride = max(1, math.ceil(images / REPLAY_PIXEL_BUDGET))
        stream = self.hub.names.traj(tailer.job_id)
        entries = self.hub.client.redis.xrange(
            stream, after(viewer.last_id), upto, count=CHUNK_IMAGES // n or 1
        )
        room = self.backlog_bytes - backlog
        for entry_id, fields in entries:
            if viewer.gone or room <= 0:
                break
            frame = self.hub.decode(tailer.job_id, fields)
            if frame is not None and frame.step > viewer.last_step:
                payload = self.hub.frame_payload(frame)
                if viewer.stride > 1 and viewer.replayed % viewer.stride and entry_id != upto:
                    payload["pixels"] = None  # the strip still gets every step; pictures every k-th
                self.hub.emit("frame", payload, to=viewer.sid)
                room -= len(payload["pixels"] or "") + 256
                viewer.replayed += 1
                viewer.last_step = frame.step
            viewer.last_id = entry_id
        if not entries:  # trimmed or deleted under us: nothing more to replay
            viewer.last_id = upto
        return True

    def _go_live(self, viewer: Viewer) -> None:
        """Caught up: into the room (tailer.lock held), with the status it missed meanwhile."""
        tailer = viewer.tailer
        self.hub.socketio.server.enter_room(viewer.sid, tailer.room, namespace=NAMESPACE)
        viewer.live = True
        viewer.replayed = 0
        self.discard(viewer)
        status = tailer.status
        if status is not None and (tailer.finished or status_changed(viewer.sent, status)):
            self.hub.emit("job", status, to=viewer.sid)  # the final status comes after the last frame
            viewer.sent = status
