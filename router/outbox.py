"""What one scheduler call asks the router worker to do (router/scheduler.py fills it, the glue in
router/worker.py carries it out): requests to publish, finished steps to store, jobs to settle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ddm.schema.messages import Frame
from ddm.schema.solver import SolverHistory

if TYPE_CHECKING:
    from ddm.router.jobrun import JobRun


@dataclass(frozen=True)
class Send:
    """A request to publish: to the expert's queue, or (a hedge) to one replica's own queue."""

    expert: int
    request_id: str
    body: bytes
    resend: bool = False
    replica: str | None = None  # a hedge: the worker id whose own queue gets it


@dataclass(frozen=True)
class StepDone:
    """A finished step to store: its frame, the full-precision latent, the job's mean step time, the
    steps it has run so far without one of their experts (expert -> steps), and the solver's history
    (part of the resume state)."""

    frame: Frame
    x: np.ndarray
    mean_step_ms: float
    latency_ms: float
    degraded: dict[int, list[int]] = field(default_factory=dict)
    history: SolverHistory = field(default_factory=SolverHistory)


@dataclass
class Outbox:
    """What one scheduler call asks the glue to do, in this order: publish, store, settle."""

    sends: list[Send] = field(default_factory=list)
    steps: list[StepDone] = field(default_factory=list)
    done: list[JobRun] = field(default_factory=list)
    failed: list[tuple[JobRun, str]] = field(default_factory=list)
