"""The DDM sampler: one evaluation = route, ask each chosen expert for its rows, mix; a step = the
job's solver's evaluations (one for Euler and Adams-Bashforth, two for Heun and midpoint), then its
update (router/solvers.py).

The step is split into pure pieces (plan_step, combine, solvers.stage_point and finish) so that two
drivers share one implementation: `sample_local` below calls experts in-process; the router worker
sends the same plan's rows over RabbitMQ and calls `combine` when the replies are in. Routing happens
at every evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ddm.router.policies import RoutingPolicy, without_gone
from ddm.router.solvers import finish, stage_point
from ddm.schema.errors import SchemaError
from ddm.schema.init_noise import check_init_noise, noise_digest
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.schema.solver import Solver, SolverHistory
from ddm.schema.strategy import Strategy
from ddm.schema.text_messages import embedding_key

# velocity(x f32 [b,C,H,W], t f32 [b], y i64 [b], guidance f32 [b][, text_keys u8 [b, 2, 16]]) -> v f32
# [b,C,H,W] (the sample space); text_keys only for a text job (JobArrays.inputs)
VelocityFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def initial_noise(spec: JobSpec, space: SampleSpace = LEGACY) -> np.ndarray:
    """x at t = 0: float32 [n, C, H, W] of the sample space, a function of the seed, n and the shape only
    (in the legacy space exactly default_rng(seed).standard_normal((n, 1, 32, 32), dtype=float32), as
    before sample spaces: the same images bit for bit)."""
    return np.random.default_rng(spec.seed).standard_normal((spec.n, *space.shape), dtype=np.float32)


def start_noise(resolved: ResolvedJob, given: np.ndarray | None) -> np.ndarray:
    """x at t = 0 of an in-process run: the seed's noise, or `given` (checked against the job's space
    and against the digest its spec names, when it names one)."""
    spec, space = resolved.spec, resolved.space
    if given is None:
        if spec.init_noise is not None:
            raise SchemaError(
                f"job {spec.job_id} starts from a given noise ({spec.init_noise[:12]}): pass it"
            )
        return initial_noise(spec, space)
    x = check_init_noise(given, spec.n, space)
    if spec.init_noise is not None and noise_digest(x) != spec.init_noise:
        raise SchemaError(
            f"job {spec.job_id}: this is not the initial noise its spec names ({spec.init_noise[:12]})"
        )
    return x


@dataclass(frozen=True, eq=False)
class JobArrays:
    """What a job's steps need besides x, built once from a resolved job: the time grid, the label and
    guidance rows. Both drivers (sample_local, the router worker) step with it."""

    job: ResolvedJob
    grid: np.ndarray  # float32 [steps + 1], t of each step (the job's grid)
    labels: np.ndarray  # int64 [n], the space's null class for an unconditional image
    guidance: np.ndarray  # float32 [n], 1 on unconditional rows
    # a text job's: uint8 [n, 2, KEY_BYTES], each row's prompt and guidance-null embedding keys
    # (schema/text_messages.py embedding_key); None for a class job
    text_keys: np.ndarray | None = None

    @classmethod
    def of(cls, job: ResolvedJob) -> JobArrays:
        spec = job.spec
        labels = np.asarray(spec.labels, dtype=np.int64)  # the null class: an unconditional image
        if job.text is not None:  # every row is guided: against the negative or the empty prompt
            keys = [np.frombuffer(embedding_key(job.text, p), np.uint8) for p in job.prompts]
            text_keys = np.tile(np.stack(keys)[None], (spec.n, 1, 1))
            guidance = np.full(spec.n, job.guidance, np.float32)
        else:
            text_keys = None
            # an unconditional row's guided velocity is v_null + g * (v_null - v_null) = v_null: guidance
            # 1 there says so, and spares the expert the extra null-class row it would add for g != 1
            guidance = np.where(labels == job.space.null_class, 1.0, job.guidance).astype(np.float32)
        return cls(
            job=job, grid=job.grid.times(spec.steps), labels=labels, guidance=guidance, text_keys=text_keys
        )

    @property
    def spec(self) -> JobSpec:
        return self.job.spec

    @property
    def space(self) -> SampleSpace:
        return self.job.space

    def noise(self) -> np.ndarray:
        """x at t = 0 (initial_noise in the job's space)."""
        return initial_noise(self.spec, self.space)

    @property
    def strategy(self) -> Strategy:
        return self.job.strategy

    @property
    def solver(self) -> Solver:
        return self.job.solver

    def t(self, step: int) -> float:
        """t before step `step` (0-based)."""
        return float(self.grid[step])

    def eval_point(self, x: np.ndarray, step: int, velocities: list[np.ndarray]) -> tuple[np.ndarray, float]:
        """The x and t of step `step`'s next evaluation, after this step's `velocities` so far."""
        return stage_point(self.solver, self.grid, step, x, velocities)

    def inputs(self, x: np.ndarray, t: float, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """The arguments of a VelocityFn for `rows` of the latent x at time t (an evaluation point): x, t,
        labels and guidance, and a text job's embedding keys."""
        t_rows = np.full(len(rows), t, np.float32)
        out = (x[rows], t_rows, self.labels[rows], self.guidance[rows])
        return out if self.text_keys is None else (*out, self.text_keys[rows])

    def advance(
        self, x: np.ndarray, step: int, velocities: list[np.ndarray], history: SolverHistory
    ) -> tuple[np.ndarray, SolverHistory]:
        """x after step `step` from this step's mixed velocities (one per evaluation), and the solver's
        history after it."""
        x_next = finish(self.solver, self.grid, step, x, velocities, history)
        return x_next, history.push(velocities[0], self.solver.history)


@dataclass(frozen=True)
class StepPlan:
    """Who serves which rows at one step."""

    weights: np.ndarray  # float32 [n, K]
    rows: dict[int, np.ndarray]  # expert id -> int64 row indices with weight > 0 (ascending ids)
    missing: tuple[int, ...] = ()  # experts the routing chose that had no live worker: left out

    @property
    def experts(self) -> tuple[int, ...]:
        return tuple(self.rows)


def plan_step(
    policy: RoutingPolicy, strategy: Strategy, x: np.ndarray, t: float | np.ndarray, labels: np.ndarray
) -> StepPlan:
    """Route every sample of a job at time t. x f32 [n,1,32,32], labels i64 [n]; t a scalar (one job's
    step), or f32 [n], one t per row (`ddm distill`'s training batches)."""
    return _plan(policy.weights(x, np.full(len(x), t, np.float32), labels, strategy))


def _plan(weights: np.ndarray, missing: tuple[int, ...] = ()) -> StepPlan:
    rows = {k: np.flatnonzero(weights[:, k] > 0) for k in range(weights.shape[1])}
    return StepPlan(weights=weights, rows={k: r for k, r in rows.items() if len(r)}, missing=missing)


def _plan_without(weights: np.ndarray, rerouted: np.ndarray, gone: frozenset[int]) -> StepPlan:
    """One job's plan with the gone experts routed around, if that frees the whole job: when some row
    still needs a gone expert the job waits for it anyway, so every row keeps its routing."""
    idle = sorted(gone)
    if not idle or rerouted[:, idle].any():
        return _plan(weights)
    missing = tuple(k for k in idle if weights[:, k].any())
    return _plan(rerouted, missing)


def plan_steps(
    policy: RoutingPolicy,
    strategy: Strategy,
    xs: list[np.ndarray],
    ts: list[float],
    labels: list[np.ndarray],
    gone: frozenset[int] = frozenset(),
) -> list[StepPlan]:
    """plan_step for several jobs at once, with ONE router call over all their samples (the router
    worker plans every job whose step is due together; a learned router is a network, and one call on
    many rows costs far less than a call a row: the small JAX router's about what one row does, Paris's
    DiT-B on a CPU grows with the rows). Experts in `gone` have no live worker: a mixing
    strategy routes around them (policies.without_gone) and the plan lists them as missing."""
    sizes = [len(x) for x in xs]
    t_rows = np.concatenate([np.full(n, t, np.float32) for n, t in zip(sizes, ts, strict=True)])
    weights, rerouted = without_gone(
        policy, np.concatenate(xs), t_rows, np.concatenate(labels), strategy, gone
    )
    split = np.cumsum(sizes)[:-1]
    pairs = zip(np.split(weights, split), np.split(rerouted, split), strict=True)
    return [_plan_without(w, r, gone) for w, r in pairs]


def combine(
    plan: StepPlan, velocities: Mapping[int, np.ndarray], n: int, shape: tuple[int, ...] | None = None
) -> np.ndarray:
    """v = sum_k w_k v_k over the plan's experts, in ascending expert id (a fixed order, so both
    drivers add in the same order). velocities[k] holds the rows plan.rows[k], in that order.
    shape: one sample's (C, H, W); None: the velocities' (the legacy space's where there are none)."""
    if shape is None:
        shape = next(iter(velocities.values())).shape[1:] if velocities else LEGACY.shape
    v = np.zeros((n, *shape), np.float32)
    for k, rows in plan.rows.items():
        v[rows] += plan.weights[rows, k][:, None, None, None] * velocities[k]
    return v


def sample_local(
    experts: Mapping[int, VelocityFn],
    policy: RoutingPolicy,
    resolved: ResolvedJob,
    on_step: Callable[[int, float, np.ndarray, StepPlan], None] | None = None,
    prompt: np.ndarray | None = None,
    init_noise: np.ndarray | None = None,
) -> np.ndarray:
    """Sample a resolved job in-process, in its space (resolved.space). Returns x at t = 1, float32
    [n, C, H, W]. prompt: a text job's prompt embedding, which a prompt-aware router reads on every row
    (text_rows.job_velocities gives it). init_noise: x at t = 0 instead of the seed's (a spec that names
    one, JobSpec.init_noise, needs it, and its digest must match: schema/init_noise.py).

    on_step(step, t, x, plan) is called after each step with the new x (step counts from 1) and the
    routing of the step's first evaluation (the one at x before the step, which frames record).
    """
    job = JobArrays.of(resolved)
    spec = resolved.spec
    route_y = job.labels
    if policy.reads_prompts and prompt is not None:
        route_y = np.repeat(np.asarray(prompt, np.float32)[None], spec.n, axis=0)
    x, history = start_noise(resolved, init_noise), SolverHistory()
    for i in range(spec.steps):
        mixed: list[np.ndarray] = []
        plans: list[StepPlan] = []
        for _ in range(job.solver.stages):
            x_eval, t_eval = job.eval_point(x, i, mixed)
            plan = plan_step(policy, job.strategy, x_eval, t_eval, route_y)
            velocities = {k: experts[k](*job.inputs(x_eval, t_eval, rows)) for k, rows in plan.rows.items()}
            mixed.append(combine(plan, velocities, spec.n, job.space.shape))
            plans.append(plan)
        x, history = job.advance(x, i, mixed, history)
        if on_step is not None:
            on_step(i + 1, job.t(i + 1), x, plans[0])
    return x
