"""The decoder stage of a latent deployment, as the router keeps it: jobs whose last step is stored and
whose pixels are asked of `ddm.decoder`. Pure bookkeeping (no pika, no Redis): the worker glue
(router/worker.py) publishes what this says and settles what it hands back.

A job's latents go out once when its last step is stored; an unanswered request is sent again (the
same request id: whichever reply comes first wins, a later one matches nothing) every `timeout_s`, and
the job fails naming the decoder queue after `give_up_s` without a reply. The job message stays unacked
all the while, so a router that dies here leaves it to another router, which resumes the job at its
last stored step (the end) and asks for the decoding again: nothing is lost, decoding is pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddm.router.jobrun import JobRun


@dataclass
class Decoding:
    job: JobRun
    request_id: str
    first_sent: float
    last_sent: float


class DecodeStage:
    def __init__(self, timeout_s: float, give_up_s: float):
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self.pending: dict[str, Decoding] = {}  # request id -> the job waiting for its pixels

    def start(self, job: JobRun, now: float) -> Decoding:
        """A job's last step is stored: ask for its pixels (the caller publishes the request)."""
        entry = Decoding(job, f"{job.job_id}.decode", now, now)
        self.pending[entry.request_id] = entry
        return entry

    def answered(self, request_id: str) -> Decoding | None:
        """The job a reply settles; None for a reply that matches nothing (a duplicate, or stale)."""
        return self.pending.pop(request_id, None)

    def sweep(self, now: float) -> tuple[list[Decoding], list[Decoding]]:
        """(requests to send again, jobs to fail: no reply within give_up_s)."""
        resend, failed = [], []
        for rid, entry in list(self.pending.items()):
            if now - entry.first_sent >= self.give_up_s:
                failed.append(self.pending.pop(rid))
            elif now - entry.last_sent >= self.timeout_s:
                entry.last_sent = now
                resend.append(entry)
        return resend, failed

    def drop(self, job_id: str) -> Decoding | None:
        """Forget a job (its lease went to another router)."""
        for rid, entry in list(self.pending.items()):
            if entry.job.job_id == job_id:
                return self.pending.pop(rid)
        return None

    def clear(self) -> list[Decoding]:
        """Everything waiting, forgotten (the connection or Redis went away): the jobs' deliveries go
        back and are resumed, at their end, by whichever router gets them."""
        waiting, self.pending = list(self.pending.values()), {}
        return waiting

    def job_ids(self) -> list[str]:
        return [e.job.job_id for e in self.pending.values()]
