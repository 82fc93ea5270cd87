"""A job with everything its deployment decides filled in and typed: what a router (or the local
sampler) runs. Being resolved is a type, not a run-time check: DeploymentDescriptor.resolve makes one
from a submitted JobSpec with the deployment's defaults; ResolvedJob.of takes a spec that already names
them all (tests, benchmarks, evaluation)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .conditioning import TextEncoderSpec
from .errors import SchemaError, expected
from .messages import DEFAULT_EXPERT_LOSS_POLICY, JobSpec, check_labels
from .sample_space import LEGACY, SampleSpace
from .solver import DEFAULT_GRID, DEFAULT_SOLVER, Grid, Solver
from .strategy import Strategy


@dataclass(frozen=True)
class ResolvedJob:
    """spec: the JobSpec with strategy, guidance, on_expert_loss, solver and grid set (the strategy as
    spelled; the job hash records str(strategy), the canonical spelling); strategy: parsed once, here;
    space: the deployment's sample space (the shape of its noise and latents, its null label); text: a
    text deployment's encoder (its prompts' embeddings are keyed by it), None where labels condition."""

    spec: JobSpec
    strategy: Strategy
    space: SampleSpace = LEGACY
    text: TextEncoderSpec | None = None
    # parsed once, here, from the spec (the router's per-step code reads these, never the strings)
    solver: Solver = dataclasses.field(init=False)
    grid: Grid = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "solver", Solver.parse(self.spec.solver or DEFAULT_SOLVER))
        object.__setattr__(self, "grid", Grid.parse(self.spec.grid or DEFAULT_GRID))

    @classmethod
    def of(
        cls, spec: JobSpec, space: SampleSpace = LEGACY, text: TextEncoderSpec | None = None
    ) -> ResolvedJob:
        """A spec that names its strategy and guidance (on_expert_loss unset: 'wait', the default; solver
        and grid unset: Euler on the uniform grid), in `space` (its labels checked against it, null
        labels as the space's null class K: the internal form, JobSpec.in_space)."""
        spec = spec.in_space(space)
        check_labels("labels", spec.labels, space)
        if spec.strategy is None or spec.guidance is None:
            raise SchemaError(
                f"job {spec.job_id}: "
                + expected("a resolved spec (strategy and guidance set)", (spec.strategy, spec.guidance))
            )
        spec = dataclasses.replace(
            spec,
            on_expert_loss=spec.on_expert_loss or DEFAULT_EXPERT_LOSS_POLICY,
            solver=spec.solver or DEFAULT_SOLVER,
            grid=spec.grid or DEFAULT_GRID,
        )
        return cls(spec, Strategy.parse(spec.strategy), space, text)

    @property
    def nfe(self) -> int:
        """Velocity evaluations the job costs (each one a round trip to its experts)."""
        return self.solver.nfe(self.spec.steps)

    @property
    def prompts(self) -> tuple[str, str]:
        """A text job's prompt and what it is guided against: its negative prompt, else the empty prompt
        (classifier-free guidance as Paris does it). No prompt is the empty prompt: an unconditional image."""
        return self.spec.prompt or "", self.spec.negative_prompt or ""

    @property
    def guidance(self) -> float:
        return float(self.spec.guidance)

    @property
    def on_expert_loss(self) -> str:
        return self.spec.on_expert_loss

    @property
    def routes_around(self) -> bool:
        """Whether it routes around an expert with no live worker (a mixing strategy, and
        on_expert_loss 'degrade') instead of waiting for it."""
        return self.strategy.mixes and self.on_expert_loss == "degrade"
