"""Listing recent jobs from the jobs index (Client.recent, Client.find; `ddm status --recent`, `ddm jobs`),
and the decorator every Client method that reads Redis wears. Client (ddm/client/client.py) mixes
JobListing in."""

from __future__ import annotations

import functools

from ddm.client.errors import JobNotFoundError
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS, unavailable
from ddm.schema.errors import SchemaError, expected
from ddm.schema.jobs import JobHash
from ddm.schema.messages import JobStatus
from ddm.schema.names import check_job_id

PAGE = 200  # job ids read from the index per round trip
MIN_PREFIX = 4  # the shortest id prefix taken for a job (as git takes abbreviated commits)
SHOWN_MATCHES = 5  # an ambiguous prefix: this many of its matches named


def redis_errors(fn):
    """Turn a lost Redis connection inside a Client method into ServiceUnavailableError."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(self.settings.redis_url, exc) from None

    return wrapper


def _job_status(value: JobStatus | str) -> JobStatus:
    try:
        return JobStatus(value)
    except ValueError:
        raise SchemaError(expected(f"a job status in {[s.value for s in JobStatus]}", value)) from None


class JobListing:
    """recent(), find() and job_id() for a class with `redis` and `names` (Client)."""

    @redis_errors
    def job_id(self, given: str) -> str:
        """The job id `given` names: itself when a job has that id, else the one indexed job whose id
        starts with it (at least MIN_PREFIX characters: the 8 the progress bar and the web UI show will
        do). JobNotFoundError when none does; SchemaError listing the matches when several do."""
        check_job_id(given)
        if self.redis.exists(self.names.job(given)):
            return given
        if len(given) < MIN_PREFIX:
            raise JobNotFoundError(f"no job {given} (an id prefix needs {MIN_PREFIX} characters or more)")
        matches = sorted(
            {(i.decode() if isinstance(i, bytes) else i) for i, _ in self.redis.zscan_iter(
                self.names.jobs_index, match=f"{given}*", count=1000
            )}
        )  # fmt: skip
        if not matches:
            raise JobNotFoundError(f"no job {given}: no job id is or starts with it (expired, or never here)")
        if len(matches) > 1:
            shown = ", ".join(matches[:SHOWN_MATCHES]) + (" ..." if len(matches) > SHOWN_MATCHES else "")
            raise SchemaError(
                expected(f"a prefix of one job's id; {given} starts {len(matches)} of them", shown)
            )
        return matches[0]

    def _newest(self, start: int, stop: int) -> list[tuple[str, JobHash | None]]:
        """(job id, job hash or None when expired) of index positions start..stop, newest first."""
        ids = [
            i.decode() if isinstance(i, bytes) else i
            for i in self.redis.zrevrange(self.names.jobs_index, start, stop)
        ]
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.names.job(job_id))
        return [
            (job_id, JobHash.decode(job_id, raw) if raw else None)
            for job_id, raw in zip(ids, pipe.execute(), strict=True)
        ]

    @redis_errors
    def recent(self, limit: int = 10) -> list[tuple[str, JobHash | None]]:
        """(job id, job hash) of the newest `limit` jobs of the jobs index, newest first; None for an
        expired one."""
        return self._newest(0, max(0, limit - 1))

    @redis_errors
    def find(
        self, status: JobStatus | str | None = None, limit: int = 20, scan: int = 10_000
    ) -> list[JobHash]:
        """The newest `limit` jobs of the jobs index with this status (None: any), newest first, looking
        at no more than the `scan` newest ids (expired ones are skipped)."""
        want = None if status is None else _job_status(status)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise SchemaError(expected("limit, an integer >= 1", limit))
        found: list[JobHash] = []
        for start in range(0, scan, PAGE):  # a page at a time: stop as soon as enough have matched
            page = self._newest(start, min(scan, start + PAGE) - 1)
            for _, job in page:
                if job is not None and (want is None or job.status == want):
                    found.append(job)
                    if len(found) == limit:
                        return found
            if len(page) < PAGE:
                break
        return found
