"""The scheduler's timer half (router/scheduler.py): per request in flight, hedge, resend, wait or fail;
then fail the jobs that wait on a gone expert past the grace period. Pure like the scheduler: the clock
is the scheduler's, and what the glue must do goes into the Outbox."""

from __future__ import annotations

from ddm.router.jobrun import JobRun, Request
from ddm.router.outbox import Outbox, Send


class Sweeping:
    """Mixed into Scheduler: uses its clock, pending requests, experts' health, timeouts and fail()."""

    def sweep(self, out: Outbox) -> None:
        """Per request in flight, in this order: an absent or gone expert's requests wait in its queue for
        a replica (the loss and grace rules bound that); a late one is hedged to a replica that answers;
        past the timeout a lost one (later requests were answered, or nothing moves and nothing is queued) is
        resent, a busy expert (its backlog drains) is waited for (with one resend per stall period, in
        case the request was lost behind the backlog), and one with no progress for max_attempts
        timeouts fails its jobs. Then jobs that wait on a gone expert past the grace fail."""
        now = self.clock()
        for request_id, p in list(self.pending.items()):
            waiting = self._waiting(p)
            health = self.experts[p.expert]
            if not waiting:  # every job in it finished, failed or was re-planned meanwhile
                del self.pending[request_id]
                continue
            if health.absent:  # its requests wait in its queue; the loss and grace rules bound that
                continue
            replica = health.hedge_target(now, p.first_sent, exclude=p.hedged_to)
            if replica is not None:
                p.hedged_to.append(replica)
                out.sends.append(Send(p.expert, request_id, p.body, resend=True, replica=replica))
                continue
            if now - p.sent_at < self.timeout_s:
                continue
            lost = health.overtook(p.sent_at) or (
                not health.progressed_within(now, self.timeout_s) and not health.depth
            )
            if lost:
                self._resend_or_fail(request_id, p, waiting, now, out)
            elif now - p.sent_at > health.stall_s and not health.stalled(now, p.first_sent):
                # busy this long: perhaps lost behind a backlog we cannot see; once more, without failing
                self._resend(request_id, p, now, out)
            elif health.stalled(now, p.first_sent):
                error = (
                    f"{self.describe(p.expert)} made no progress for {health.stall_s:g} s: "
                    f"{health.consumers} consumer(s), {health.depth} request(s) queued"
                )
                self._give_up(request_id, waiting, error, out)
        self._fail_past_grace(now, out)

    def _resend_or_fail(
        self, request_id: str, p: Request, waiting: list[JobRun], now: float, out: Outbox
    ) -> None:
        if p.attempts >= self.max_attempts:
            error = (
                f"{self.describe(p.expert)} did not answer {request_id} after {p.attempts} sends of "
                f"{self.timeout_s:g} s each, though it has live workers"
            )
            self._give_up(request_id, waiting, error, out)
            return
        p.attempts += 1
        self._resend(request_id, p, now, out)

    def _resend(self, request_id: str, p: Request, now: float, out: Outbox) -> None:
        p.sent_at = now
        out.sends.append(Send(p.expert, request_id, p.body, resend=True))

    def _give_up(self, request_id: str, waiting: list[JobRun], error: str, out: Outbox) -> None:
        """Drop the request and fail every job that waits on it with `error`."""
        self.pending.pop(request_id, None)
        for job in waiting:
            self.fail(job, error, out)

    def _fail_past_grace(self, now: float, out: Outbox) -> None:
        """A job whose step needs an expert that has had no live worker for grace_s fails, naming it."""
        for k, health in self.experts.items():
            if health.live:
                continue
            for job in list(self.jobs.values()):
                if job.plan is None or not self._needs(job, k):
                    continue
                if now - max(health.gone_since, job.step_started) >= self.grace_s:
                    self.fail(
                        job,
                        f"step {job.step + 1} needs {self.describe(k)}, which has had no live worker "
                        f"for {self.grace_s:g} s",
                        out,
                    )
