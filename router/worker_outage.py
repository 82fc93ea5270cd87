"""The router worker's ownership and Redis outages: a lost or silent Redis pauses the router (every
running job back to the held deliveries) instead of ending it, and held deliveries are asked again
once it answers; a job whose lease another router took is dropped and its delivery held. Mixed into
RouterWorker (router/worker.py)."""

from __future__ import annotations

import logging
import time
import uuid

import redis

from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS

log = logging.getLogger("ddm.router")


class OutageAndLeases:
    """Uses the worker's settings, store, scheduler, stage calls, waiting list and _admit."""

    def _guarded(self, fn):
        """fn, with a Redis outage turned into a pause instead of the end of the process. Only a lost
        or silent Redis is an outage: a refused command (NOPERM, WRONGTYPE) is a set-up error and ends
        the process with its message."""

        def call(*args):
            try:
                fn(*args)
            except REDIS_CONNECTION_ERRORS as exc:
                self._pause(exc)

        return call

    def _pause(self, exc: Exception) -> None:
        """Redis went away: every running job goes back to the held deliveries (unacked), its unstored
        steps are dropped, and nothing runs until Redis answers (then each resumes from its stored
        state)."""
        if not self.paused:
            log.warning(
                "Redis did not answer (%r): %d job(s) paused until it does", exc, len(self.scheduler.jobs)
            )
        self.paused = True
        self.waiting.extend(job.tag for job in self.scheduler.jobs.values())
        self.waiting.extend(d.job.tag for d in self.stage_calls.clear())
        self.scheduler.reset(uuid.uuid4().hex[:12])  # replies to requests sent so far match nothing
        self._writes.clear()

    def _retry(self) -> None:
        """Every RETRY_S: while paused, is Redis back? Then ask again about every held delivery."""
        if self.paused:
            try:
                self.store.r.ping()
            except redis.RedisError:
                return
            self.paused = False
            self._beats_trusted_at = time.monotonic() + 2 * self.settings.heartbeat_s
            log.info("Redis answers again: %d held job(s) asked again", len(self.waiting))
        held, self.waiting = self.waiting, []
        for i, delivery in enumerate(held):
            try:
                self._admit(delivery)
            except REDIS_CONNECTION_ERRORS as exc:
                self.waiting.extend(held[i + 1 :])
                self._pause(exc)
                self.waiting.append(delivery)
                return

    def _renew(self) -> None:
        for job_id in self.store.renew(list(self.scheduler.jobs) + self.stage_calls.job_ids()):
            self._lose(job_id)

    def _lose(self, job_id: str) -> None:
        """Another router holds this job's lease now (ours expired): stop running it, hold its delivery."""
        call = self.stage_calls.drop(job_id)
        job = self.scheduler.drop(job_id) or (call.job if call else None)
        if job is not None:
            log.warning("job %s: lease lost to another router; holding its message", job_id)
            self.waiting.append(job.tag)
