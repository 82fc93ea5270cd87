"""The router's look at its experts, every OBSERVE_S (router/worker.py): what the broker and the
heartbeats say about each one. router/experts.py judges what it means."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ddm.runtime.heartbeat import read_live_workers
from ddm.schema.names import Names

log = logging.getLogger("ddm.router")


@dataclass(frozen=True)
class ExpertLook:
    expert: int
    consumers: int  # on its queue: a killed worker's consumer vanishes with its connection
    depth: int  # requests ready in its queue (not those already in a worker's prefetch)
    heartbeats: int | None  # live heartbeat records of its workers (None: none)
    served: int | None  # their forward passes in total (None: no heartbeat)


def probe_experts(channel, r, names: Names, num_experts: int) -> list[ExpertLook]:
    """One passive declare per expert queue, and one read of the live heartbeats."""
    beats = [b for b in read_live_workers(r, names).values() if b.role == "expert"]
    looks = []
    for k in range(num_experts):
        method = channel.queue_declare(names.expert_queue(k), passive=True).method
        mine = [b for b in beats if b.expert_id == k]
        served = sum(int(b.counters.get("batches", 0)) for b in mine) if mine else None
        looks.append(ExpertLook(k, method.consumer_count, method.message_count, len(mine) or None, served))
    return looks


def report_looks(scheduler, looks: list[ExpertLook], metrics, names: Names, *, beats_trusted: bool) -> None:
    """Hand each look to the scheduler (which judges it), export the verdicts, and log each expert
    judged gone or back."""
    for look in looks:
        k, health = look.expert, scheduler.experts[look.expert]
        was_live = health.live
        scheduler.observe(
            k, look.consumers, look.depth, look.heartbeats, look.served, beats_trusted=beats_trusted
        )
        metrics.expert_live.labels(str(k)).set(int(health.live))
        metrics.queue_messages.labels(names.expert_queue(k)).set(look.depth)  # the experts do not probe
        metrics.expert_window.labels(str(k)).set(health.window())
        if was_live and not health.live and not health.seen:  # at start: its worker may still be loading
            log.info(
                "expert %d has no worker yet (queue %s); jobs that need it wait", k, names.expert_queue(k)
            )
        elif was_live and not health.live:
            log.warning(
                "expert %d has had no live worker for %.1f s (queue %s)",
                k,
                health.gone_for(scheduler.clock()),
                names.expert_queue(k),
            )
        elif health.live and not was_live:
            log.info("expert %d is served again", k)
