"""Completion webhooks (JobSpec.notify, `ddm submit --notify URL`): one POST of a job's end (done,
failed or cancelled) to the URL the job names.

The router's step loop never waits on a receiver. Its store calls `ended(job_id)` when it ends a job
(router/store.py), and the intake when it settles a queued job a client cancelled (no router ran it).
That call only puts the id on a bounded queue; when the queue is full the notification is dropped and
logged. One background thread reads the job hash (its spec's `notify`, status and error) and POSTs
JSON, with a timeout per attempt and a few attempts with backoff on a refused connection, a timeout, a
5xx, 408 or 429. Any other answer ends it: 2xx is delivered, another 4xx is the receiver's refusal.

At most once per end: a router that dies between the end and the POST loses that notification, and a
receiver that answered too slowly may get a second POST of the same end (its attempt timed out). The
body carries the job id and status, so a receiver can drop a repeat. docs/PROTOCOL.md section 4.3.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request

import redis

from ddm.schema.errors import SchemaError
from ddm.schema.jobs import JobHash

log = logging.getLogger("ddm.router.notify")

TIMEOUT_S = 5.0  # one attempt's connect and answer
ATTEMPTS = 3
BACKOFF_S = 1.0  # before attempt i+1: BACKOFF_S * 2**i
CAPACITY = 1000  # ends waiting to be sent; more are dropped (logged), never waited for
RETRIED = {408, 429}  # 4xx answers worth another attempt (5xx always are)


def body_of(job: JobHash) -> dict:
    """What the receiver gets: the job's end, as `ddm status --json` names its fields."""
    return {
        "job_id": job.job_id,
        "status": job.status.value,
        "error": job.error,
        "step": job.step,
        "steps": job.steps,
        "n": job.n,
        "deployment": job.deployment,
        "finished_at": job.finished_at,
    }


class Notifier:
    def __init__(
        self,
        r: redis.Redis,
        names,
        *,
        timeout_s: float = TIMEOUT_S,
        attempts: int = ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        capacity: int = CAPACITY,
    ):
        self.r, self.names = r, names
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self._queue: queue.Queue[str | None] = queue.Queue(capacity)
        self.sent = self.given_up = self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="ddm-notify", daemon=True)
        self._thread.start()

    def ended(self, job_id: str) -> None:
        """A job ended: POST it if it names a URL. Never blocks (a full queue drops it, logged)."""
        try:
            self._queue.put_nowait(job_id)
        except queue.Full:
            self.dropped += 1
            log.warning(
                "job %s: its webhook dropped (%d ends waiting to be sent)", job_id, self._queue.qsize()
            )

    def close(self, timeout: float = 2.0) -> None:
        """Stop after what is queued, waiting at most `timeout` seconds (the thread is a daemon)."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        while (job_id := self._queue.get()) is not None:
            try:
                self._notify(job_id)
            except Exception:  # a bug here must not end the thread: later jobs still get theirs
                log.exception("job %s: its webhook failed", job_id)

    def _notify(self, job_id: str) -> None:
        try:
            raw = self.r.hgetall(self.names.job(job_id))
            job = JobHash.decode(job_id, raw) if raw else None
        except (redis.RedisError, SchemaError) as exc:
            log.warning("job %s: its webhook not sent: the job hash could not be read (%s)", job_id, exc)
            return
        url = job.spec.notify if job is not None and job.spec is not None else None
        if url is None:
            return
        data = json.dumps(body_of(job)).encode()
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            why = self._post(url, data)
            if why is None:
                self.sent += 1
                return
            if why.startswith("refused"):
                break
        self.given_up += 1
        log.warning("job %s: webhook %s not delivered (%s)", job_id, url, why)

    def _post(self, url: str, data: bytes) -> str | None:
        """None when delivered; else why not ("refused ..." for an answer not worth repeating)."""
        req = urllib.request.Request(
            url, data=data, method="POST", headers={"Content-Type": "application/json", "User-Agent": "ddm"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read(1024)
            return None
        except urllib.error.HTTPError as exc:
            retry = exc.code >= 500 or exc.code in RETRIED
            return f"HTTP {exc.code}" if retry else f"refused with HTTP {exc.code}"
        except (OSError, ValueError) as exc:  # refused, unreachable, timed out (URLError is an OSError)
            return f"{type(exc).__name__}: {exc}"
