"""The calls a router makes to the stages beside the experts, as it keeps them: a latent job whose last
step is stored asks `ddm.decoder` for its pixels ("decode"); a text job asks `ddm.text` for its prompt
embeddings before its first step ("encode"). Pure bookkeeping (no pika, no Redis): the worker glue
(router/worker_decoding.py, router/worker_text.py) publishes what this says and settles what it hands
back.

A call goes out once; an unanswered one is sent again (the same request id: whichever reply comes first
wins, a later one matches nothing) every `timeout_s`, and the job fails naming the stage's queue after
`give_up_s` without a reply. The job message stays unacked all the while, so a router that dies here
leaves it to another router, which resumes the job at its last stored step and makes the call again:
nothing is lost, decoding and encoding are pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddm.router.jobrun import JobRun

KINDS = ("decode", "encode")


@dataclass
class StageCall:
    job: JobRun
    request_id: str
    kind: str  # one of KINDS
    first_sent: float
    last_sent: float


class StageCalls:
    def __init__(self, timeout_s: float, give_up_s: float):
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self.pending: dict[str, StageCall] = {}  # request id -> the job waiting for its answer

    def start(self, job: JobRun, now: float, kind: str = "decode") -> StageCall:
        """Ask a stage for what a job waits for (the caller publishes the request)."""
        assert kind in KINDS, kind
        entry = StageCall(job, f"{job.job_id}.{kind}", kind, now, now)
        self.pending[entry.request_id] = entry
        return entry

    def answered(self, request_id: str) -> StageCall | None:
        """The job a reply settles; None for a reply that matches nothing (a duplicate, or stale)."""
        return self.pending.pop(request_id, None)

    def sweep(self, now: float) -> tuple[list[StageCall], list[StageCall]]:
        """(requests to send again, jobs to fail: no reply within give_up_s)."""
        resend, failed = [], []
        for rid, entry in list(self.pending.items()):
            if now - entry.first_sent >= self.give_up_s:
                failed.append(self.pending.pop(rid))
            elif now - entry.last_sent >= self.timeout_s:
                entry.last_sent = now
                resend.append(entry)
        return resend, failed

    def drop(self, job_id: str) -> StageCall | None:
        """Forget a job (its lease went to another router)."""
        for rid, entry in list(self.pending.items()):
            if entry.job.job_id == job_id:
                return self.pending.pop(rid)
        return None

    def clear(self) -> list[StageCall]:
        """Everything waiting, forgotten (the connection or Redis went away): the jobs' deliveries go
        back and are resumed by whichever router gets them."""
        waiting, self.pending = list(self.pending.values()), {}
        return waiting

    def job_ids(self) -> list[str]:
        return [e.job.job_id for e in self.pending.values()]
