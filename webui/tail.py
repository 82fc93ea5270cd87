"""Redis -> browsers: one tailer per watched job, shared by all its viewers, all read by ONE reader thread.

    hub.watch(sid, job_id, address, token)   # admit, send the job's status; the Replayer catches sid up
    hub.leave(sid)                           # disconnect: unwatch and forget the socket entirely

The reader follows every watched job's trajectory stream with a single XREAD BLOCK over all of them (one
thread and one Redis connection, however many jobs are watched) and emits each new step once to the
room `job:<id>`, encoded once for every viewer in it. It re-reads the watched jobs' hashes (one
pipeline) every STATUS_EVERY_S and emits a status that changed (a queued job's place in the queue and
its estimate included: one reading of the queue for every watched queued job, at most every
QUEUE_EVERY_S); at a terminal status it drains the stream and emits the final status, and the job is
read no more.

Bounded memory, whatever a browser does (docs/WEBUI.md, "Limits"):
- a viewer joins out of the room and is caught up by the Replayer (replay.py), which sends the steps so
  far only as fast as the connection takes them, then moves it into the room under the tailer's lock:
  every step arrives once, in order (replay up to the tailer's last entry, live after it);
- after each step emitted to a room, a viewer whose connection holds more than its backlog bound is
  taken out of the room and caught up again from where it was (a slow browser skips nothing, it gets
  fewer pictures); one whose backlog does not drain for viewer_stall_s is disconnected;
- watch requests are limited per socket and sockets watching per address (watch_gate.py).

Events (server -> browser): "job" (status payload: on watch, on every status change, and last when the
job has ended or expired), "frame" (payloads.frame_payload; "pixels" may be null in a long replay).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.errors import SchemaError
from ddm.schema.jobs import JobHash, decode_traj_entry
from ddm.schema.messages import Frame, JobStatus
from ddm.schema.names import check_job_id
from ddm.webui.backlog import NAMESPACE, Backlogs
from ddm.webui.keys import Principal, visible
from ddm.webui.payloads import frame_payload, job_payload
from ddm.webui.pixels import DEFAULT_RANGE
from ddm.webui.replay import Replayer
from ddm.webui.viewers import Tailer, Viewer, status_changed

log = logging.getLogger(__name__)

BLOCK_MS = 250  # longest XREAD BLOCK: a job watched meanwhile is read from the next call on
STATUS_EVERY_S = 0.5  # how often the reader re-reads a watched job's hash
NEAR_END_STATUS_S = 0.1  # ... once its last step is in: the final status follows soon
READ_IMAGES = 1024  # images one XREAD may return in all (COUNT per stream is derived from it)
TERMINAL = {s.value for s in JobStatus if s.terminal}
QUEUED_BYTES = JobStatus.QUEUED.value.encode()
QUEUE_EVERY_S = 1.0  # the reader reads the queue (every watched queued job's place) at most this often


def parse_xread(reply) -> list[tuple[bytes, list]]:
    """XREAD's reply, RESP2 ([[stream, entries], ...]) or RESP3 ({stream: [entries]}), as pairs."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [(k, v[0] if v and isinstance(v[0], list) else v) for k, v in reply.items()]
    return [(stream, entries) for stream, entries in reply]


class TailHub:
    def __init__(
        self,
        socketio,
        client,
        gate,
        *,
        backlog_bytes: int,
        stall_s: float,
        block_ms: int = BLOCK_MS,
        value_range=None,
        preview=None,
    ):
        """value_range: shape [C, H, W] -> (lo, hi) the sample space maps to black..white
        (ClusterMonitor.value_range; default [-1, 1]); preview: shape -> a latent deployment's
        DecoderInfo or None (ClusterMonitor.preview; default: frames are drawn as they are)."""
        self.socketio = socketio
        self.value_range = value_range or (lambda shape: DEFAULT_RANGE)
        self.preview = preview or (lambda shape: None)
        self.client = client  # webui.redis_pool.UIClient: status() and the UI's shared Redis pool
        self.names = client.names
        self.max_bytes = client.settings.max_message_bytes
        self.gate = gate  # webui.watch_gate.WatchGate
        self.backlogs = Backlogs(socketio)
        self.backlog_bytes = backlog_bytes
        self.block_ms = block_ms
        self.lock = threading.Lock()  # tailers, viewers, per_address; taken before any tailer's lock
        self.tailers: dict[str, Tailer] = {}
        self.viewers: dict[str, Viewer] = {}  # sid -> its viewer
        self.per_address: dict[str, int] = {}  # address -> sockets watching
        self.replayer = Replayer(self, backlog_bytes=backlog_bytes, stall_s=stall_s)
        self._wake = threading.Event()
        self.lagged = 0  # times a live viewer fell out of its room (counters for /healthz)
        self.dropped = 0  # viewers disconnected for taking nothing
        self._reader_started = False
        self._closed = False
        self._places: tuple[float, dict] = (-1.0, {})  # (monotonic time read, job id -> QueuePosition)
        self._places_lock = threading.Lock()  # one reading at a time; the others wait for it and share it

    # ------------------------------------------------------------ viewers

    def watch(
        self, sid: str, job_id: object, address: str, token: str | None = None, authenticated=None
    ) -> dict[str, Any]:
        """Make `sid` a viewer of `job_id` (it stops watching any other job). Returns the job payload.
        authenticated: who the socket connected as (keys.py Principal; then the request needs no token).
        A key user may watch only their own jobs: another's is JobNotFoundError, as no job is.

        Raises SubmitError (too_many_watches, unauthorized, rate_limited), SchemaError for a malformed id,
        JobNotFoundError for an unknown or expired job.
        """
        try:
            who = self.gate.admit(sid, token, address, authenticated)
            return self._watch(sid, job_id, address, who)
        finally:
            if not self.socketio.server.manager.is_connected(sid, NAMESPACE):
                self.leave(sid)  # it disconnected while this ran: its leave() may have come first

    def _watch(self, sid: str, job_id: object, address: str, who: Principal) -> dict[str, Any]:
        check_job_id(job_id)
        job = visible(who, self.client, job_id)
        queued = job.status is JobStatus.QUEUED
        status = job_payload(job, self.queue_positions().get(job_id) if queued else None)
        self.unwatch(sid)
        with self.lock:
            # Socket.IO's threading mode runs each event on its own thread: another watch of this socket may
            # have made it a viewer since the unwatch above; replace that one, or its tailer keeps a viewer
            # no socket owns (and the tailer is never freed)
            self.gate.check_address(address, self.per_address.get(address, 0))
            stale = self._forget_viewer(sid)
            tailer = self.tailers.get(job_id)
            if tailer is None:
                tailer = self.tailers[job_id] = Tailer(job_id, n=status["n"], steps=status["steps"])
            viewer = Viewer(sid, address, tailer)
            with tailer.lock:
                tailer.viewers.add(viewer)
                if tailer.status is None:
                    tailer.status = status
                current = tailer.status
                viewer.sent = current
            self.viewers[sid] = viewer
            self.per_address[address] = self.per_address.get(address, 0) + 1
        if stale is not None:
            self.replayer.discard(stale)
        self.emit("job", current, to=sid)  # before any frame: the page learns the job's shape
        self.replayer.add(viewer)
        self._start_reader()
        return current

    def unwatch(self, sid: str) -> None:
        with self.lock:
            viewer = self._forget_viewer(sid)
        if viewer is not None:
            self.replayer.discard(viewer)

    def _forget_viewer(self, sid: str) -> Viewer | None:
        """Take `sid`'s viewer out of its tailer (freed with its last viewer) and the counts; self.lock held.
        Returns it (the caller discards it from the replayer, outside the lock), None if it had none."""
        viewer = self.viewers.pop(sid, None)
        if viewer is None:
            return None
        left = self.per_address[viewer.address] - 1
        if left:
            self.per_address[viewer.address] = left
        else:
            del self.per_address[viewer.address]
        tailer = viewer.tailer
        with tailer.lock:
            viewer.gone = True
            tailer.viewers.discard(viewer)
            if viewer.live:
                self.socketio.server.leave_room(sid, tailer.room, namespace=NAMESPACE)
            if not tailer.viewers:
                del self.tailers[tailer.job_id]
        return viewer

    def leave(self, sid: str) -> None:
        """The socket disconnected: keep nothing of it."""
        self.unwatch(sid)
        self.gate.forget(sid)

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {"tailers": len(self.tailers), "viewers": len(self.viewers)}

    def counters(self) -> dict[str, int]:
        return {"viewers_lagged": self.lagged, "viewers_dropped": self.dropped}

    def close(self) -> None:
        with self.lock:
            self._closed = True
            self.tailers.clear()
            self.viewers.clear()
            self.per_address.clear()
        self._wake.set()
        self.replayer.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------ shared by the reader and the Replayer

    def emit(self, event: str, data: dict, *, to: str) -> None:
        self.socketio.emit(event, data, to=to, namespace=NAMESPACE)

    def decode(self, job_id: str, fields: dict) -> Frame | None:
        try:
            return decode_traj_entry(job_id, fields, max_bytes=self.max_bytes)
        except Exception as exc:  # noqa: BLE001 - a bad entry must not end the stream for everyone
            log.warning("job %s: skipping an undecodable trajectory entry: %s", job_id, exc)
            return None

    def frame_payload(self, frame: Frame) -> dict[str, Any]:
        """What the browser gets of a frame: its pixels drawn from the sample space's value range, or a
        latent deployment's linear preview of its latents."""
        shape = tuple(frame.x.shape[1:])
        decoder = self.preview(shape)
        if decoder is not None:
            return frame_payload(frame, decoder.pixel_space.value_range, decoder)
        return frame_payload(frame, self.value_range(shape))

    def drop(self, viewer: Viewer, why: str) -> None:
        """Disconnect a viewer that stopped reading (no lock held: the disconnect handler unwatches)."""
        self.dropped += 1
        self.backlogs.drop(viewer.sid, why)

    # ------------------------------------------------------------ the reader thread

    def _start_reader(self) -> None:
        with self.lock:
            start = not self._reader_started and not self._closed
            self._reader_started = True
        if start:
            self.socketio.start_background_task(self._read_loop)
        self._wake.set()

    def _read_loop(self) -> None:
        while not self._closed:
            with self.lock:
                active = [t for t in self.tailers.values() if not t.finished]
            if not active:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                self._read(active)
                self._poll_statuses(active)
            except REDIS_CONNECTION_ERRORS as exc:
                log.warning(
                    "Redis unreachable while tailing %d job(s) (%s); retrying in 1 s", len(active), exc
                )
                time.sleep(1.0)
            except Exception:  # noqa: BLE001 - the reader serves every job: it must not die
                log.exception("the frame reader failed; retrying in 1 s")
                time.sleep(1.0)

    def _read(self, active: list[Tailer]) -> None:
        by_stream = {self.names.traj(t.job_id).encode(): t for t in active}
        n = max(t.n or 1 for t in active)
        count = max(1, READ_IMAGES // (n * len(active)))  # bounds one reply to about READ_IMAGES images
        near_end = any(t.steps and t.last_step >= t.steps for t in active)
        reply = self.client.redis.xread(
            {stream: t.last_id for stream, t in by_stream.items()},
            count=count,
            block=min(self.block_ms, 100) if near_end else self.block_ms,
        )
        for stream, entries in parse_xread(reply):
            key = stream if isinstance(stream, bytes) else str(stream).encode()
            self._emit_entries(by_stream[key], entries)

    def _emit_entries(self, tailer: Tailer, entries: list) -> None:
        lagging = []
        with tailer.lock:
            for entry_id, fields in entries:
                tailer.last_id = entry_id
                frame = self.decode(tailer.job_id, fields)
                if frame is None or frame.step <= tailer.last_step:
                    continue  # a resumed router may rewrite the step it resumed at
                tailer.last_step = frame.step
                tailer.n = int(frame.x.shape[0])
                live = tailer.live()
                if not live:
                    continue  # viewers catching up read it from the stream
                self.emit("frame", self.frame_payload(frame), to=tailer.room)
                for viewer in live:
                    if self.backlogs.nbytes(viewer.sid) > self.backlog_bytes:
                        self._out_of_room(tailer, viewer)
                        lagging.append(viewer)
        for viewer in lagging:
            self.replayer.add(viewer)

    def _out_of_room(self, tailer: Tailer, viewer: Viewer) -> None:
        """A live viewer whose connection falls behind: the Replayer takes it from here (tailer.lock held)."""
        self.socketio.server.leave_room(viewer.sid, tailer.room, namespace=NAMESPACE)
        self.lagged += 1
        viewer.live = False
        viewer.last_id, viewer.last_step = tailer.last_id, tailer.last_step  # all sent through the room

    def _poll_statuses(self, active: list[Tailer]) -> None:
        now = time.monotonic()
        due = [t for t in active if t.next_status <= now]
        if not due:
            return
        pipe = self.client.redis.pipeline(transaction=False)
        for tailer in due:
            pipe.hgetall(self.names.job(tailer.job_id))
        raws = pipe.execute()
        queued = QUEUED_BYTES in (raw.get(b"status") for raw in raws)
        places = self.queue_positions() if queued else {}
        for tailer, raw in zip(due, raws, strict=True):
            near_end = tailer.steps and tailer.last_step >= tailer.steps
            tailer.next_status = now + (NEAR_END_STATUS_S if near_end else STATUS_EVERY_S)
            self._status(tailer, raw, places)

    def queue_positions(self) -> dict:
        """Every queued job's place, read at most every QUEUE_EVERY_S (O(queue length): not at every poll,
        watch or GET /api/jobs/<id>) and shared by all of them; a place may be that old."""
        with self._places_lock:
            now = time.monotonic()
            if now - self._places[0] >= QUEUE_EVERY_S:
                self._places = (now, self._queue_positions())
            return self._places[1]

    def _queue_positions(self) -> dict:
        """Every queued job's place (Client.queue_positions); {} when they cannot be read (logged): the
        statuses go on without them. A lost Redis is the reader's to handle."""
        try:
            return self.client.queue_positions(prune=False)  # read only: the routers prune
        except REDIS_CONNECTION_ERRORS:
            raise
        except Exception:  # noqa: BLE001 - the places are extra: never stop the statuses for them
            log.exception("cannot read the queue positions")
            return {}

    def _status(self, tailer: Tailer, raw: dict, places: dict) -> None:
        if not raw:
            expired = {"job_id": tailer.job_id, "status": "expired"}
            expired["error"] = "the job is no longer in Redis (it expired or was deleted)"
            self._emit_status(tailer, expired, final=True)
            return
        try:
            payload = job_payload(JobHash.decode(tailer.job_id, raw), places.get(tailer.job_id))
        except SchemaError as exc:
            log.warning("job %s: its hash does not decode (%s)", tailer.job_id, exc)
            failed = {"job_id": tailer.job_id, "status": "failed"}
            failed["error"] = f"the web UI cannot read this job's record: {exc}"
            self._emit_status(tailer, failed, final=True)
            return
        tailer.steps = payload.get("steps")
        if payload["status"] in TERMINAL:
            # frames are written before the final status: drain what is left, then say so
            stream = self.names.traj(tailer.job_id)
            while entries := self._rest(stream, tailer):
                self._emit_entries(tailer, entries)
            self._emit_status(tailer, payload, final=True)
        else:
            self._emit_status(tailer, payload)

    def _rest(self, stream: str, tailer: Tailer) -> list:
        count = max(1, READ_IMAGES // max(tailer.n, 1))
        pairs = parse_xread(self.client.redis.xread({stream: tailer.last_id}, count=count))
        return pairs[0][1] if pairs else []

    def _emit_status(self, tailer: Tailer, payload: dict, *, final: bool = False) -> None:
        with tailer.lock:
            changed = status_changed(tailer.status, payload)
            tailer.status = payload
            if changed or final:
                self.emit("job", payload, to=tailer.room)
                for viewer in tailer.live():
                    viewer.sent = payload
            if final:
                tailer.finished = True
