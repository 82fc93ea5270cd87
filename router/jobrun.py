"""The scheduler's records (router/scheduler.py): a running job, and a request in flight with the
parts of the jobs whose rows it carries."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ddm.router.sampler import JobArrays, StepPlan
from ddm.schema.solver import SolverHistory


@dataclass
class JobRun:
    """One running job: its arrays, its latent after `step` steps, and the step in progress (its
    solver's evaluations so far, the point of the one being planned or in flight)."""

    arrays: JobArrays
    tag: object  # the glue's handle on the job message (its delivery tag), opaque here
    x: np.ndarray  # float32 [n,1,32,32]
    step: int  # steps done
    history: SolverHistory = field(default_factory=SolverHistory)  # a multistep solver's velocities
    plan: StepPlan | None = None
    round: int = 0  # plans made: a reply to an earlier plan (or stage) of the same step is not this one's
    mixed: list[np.ndarray] = field(default_factory=list)  # this step's evaluations so far, mixed
    first_plan: StepPlan | None = None  # the routing of the step's first evaluation (its frame's)
    missing: set[int] = field(default_factory=set)  # experts routed around at any evaluation of the step
    x_eval: np.ndarray | None = None  # the evaluation point being planned or in flight
    t_eval: float = 0.0
    got: dict[int, np.ndarray] = field(default_factory=dict)  # expert -> its rows' velocities
    compute_ms: float = 0.0  # the slowest expert forward pass that served this step
    precisions: dict[int, str] = field(default_factory=dict)  # expert -> what it computed this step at
    step_started: float = 0.0
    step_ms_total: float = 0.0
    steps_run: int = 0
    degraded: dict[int, list[int]] = field(default_factory=dict)  # expert -> steps done without it
    # what a prompt-aware router reads per row (the prompt's pooled embedding, f32 [n, width]), set
    # when the job's embeddings are at hand; None: the router reads the labels
    prompt_rows: np.ndarray | None = None

    @property
    def routing_input(self) -> np.ndarray:
        """The router's y for this job's rows: the prompt's embedding, or the labels."""
        return self.arrays.labels if self.prompt_rows is None else self.prompt_rows

    @property
    def job_id(self) -> str:
        return self.arrays.spec.job_id

    @property
    def finished(self) -> bool:
        return self.step >= self.arrays.spec.steps


@dataclass(frozen=True)
class Part:
    """The rows of one job's step inside a request, in request order."""

    job_id: str
    step: int
    round: int
    rows: int


@dataclass
class Request:
    expert: int
    body: bytes
    parts: list[Part]
    sent_at: float  # the last send (a resend restarts its timeout)
    first_sent: float
    attempts: int = 1
    hedged_to: list[str] = field(default_factory=list)  # replicas it was hedged to, in order
