"""Solvers and time grids: the text a job carries ('heun', 'shift:3'), parsed once into typed values,
the grids themselves, and the one record a multistep solver must keep across a crash.

    solver 'euler'          one evaluation per step; today's default, unchanged bit for bit
           'heun'           two per step: Euler predictor, trapezoid corrector (2nd order)
           'midpoint'       two per step: half an Euler step, then the slope there (2nd order)
           'ab2', 'ab3'     Adams-Bashforth: ONE evaluation per step, reusing the velocities of the
                            last 1 or 2 steps (order 2 or 3), bootstrapped by the lower orders
    grid   'uniform'        t = 0, 1/N, ..., 1 (schema.flow.time_grid, bit for bit)
           'shift:S'        the uniform noise level sigma = 1 - t warped by S*sigma / (1 + (S-1)*sigma)
                            (the timestep shift of SD3): S > 1 spends steps near the noise, S < 1 near the
                            data
           'edm' / 'edm:R'  Karras et al.'s rho-schedule (R = 7 by default) on the flow's noise-to-signal
                            ratio sigma = (1 - t) / t from 80 down to 0.002, between t = 0 and t = 1: dense
                            near the data, where an image's detail is decided
           'flowmatch'      the timesteps of diffusers' FlowMatchEulerDiscreteScheduler as Paris samples
                            with it (1000 training timesteps, shift 1): noise levels sigma =
                            linspace(1, 1/1000, N), then 0; t = 1 - sigma. Nearly uniform, but its last
                            step is the short one from t = 0.999 to the data

The stepping itself (which x and t each evaluation sees, how the velocities combine) is the router's:
ddm.router.solvers. What crosses a process boundary lives here: the names, the grid, and
SolverHistory, the velocities a multistep solver carries from step to step (part of a job's resume
state, so a router that crashes mid-job resumes to the same image).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import SchemaError, expected
from .flow import time_grid

# evaluations per step, and how many earlier steps' velocities a solver reuses
SOLVERS: dict[str, tuple[int, int]] = {
    "euler": (1, 0),
    "heun": (2, 0),
    "midpoint": (2, 0),
    "ab2": (1, 1),
    "ab3": (1, 2),
}
DEFAULT_SOLVER = "euler"
DEFAULT_GRID = "uniform"
# Parameters have at most 2 decimals, so their canonical spelling (f"{p:g}") is always one the pattern
# reads back; the bounds keep every grid strictly increasing in float32 up to MAX_STEPS.
GRID_SYNTAX = (
    "grid 'uniform', 'shift:S' (0.05 <= S <= 100), 'edm' / 'edm:R' (1 <= R <= 20) or 'flowmatch', "
    "parameters with at most 2 decimals"
)
_NUMBER = r"([0-9]{1,3}(?:\.[0-9]{1,2})?)"
_GRID_RE = re.compile(rf"(uniform)|(shift):{_NUMBER}|(edm)(?::{_NUMBER})?|(flowmatch)")
EDM_SIGMA_MAX = 80.0
EDM_SIGMA_MIN = 0.002
EDM_RHO = 7.0
FLOWMATCH_TRAIN_STEPS = 1000  # diffusers' FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000)


@dataclass(frozen=True)
class Solver:
    """A parsed solver name: evaluations per step and the earlier steps' velocities it reuses."""

    name: str

    @classmethod
    def parse(cls, text: object) -> Solver:
        if not isinstance(text, str) or text not in SOLVERS:
            raise SchemaError(expected(f"solver one of {', '.join(SOLVERS)}", text))
        return cls(text)

    @property
    def stages(self) -> int:
        return SOLVERS[self.name][0]

    @property
    def history(self) -> int:
        return SOLVERS[self.name][1]

    def nfe(self, steps: int) -> int:
        """Velocity evaluations (network round trips) for a job of `steps` steps."""
        return self.stages * steps

    def describe(self) -> str:
        """What a step costs, in a phrase (the web UI's hint under its menu): '2 evaluations per step:
        predictor, corrector (order 2)', '1 per step, reuses the last 2 steps (order 3)'. The one home of
        this wording."""
        order = {"euler": 1, "heun": 2, "midpoint": 2}.get(self.name, self.history + 1)
        if self.history:
            reuses = "the last step" if self.history == 1 else f"the last {self.history} steps"
            return f"1 per step, reuses {reuses} (order {order})"
        how = {"heun": ": predictor, corrector", "midpoint": ": the slope at the midpoint"}.get(self.name, "")
        return f"{self.stages} evaluation{'s' if self.stages > 1 else ''} per step{how} (order {order})"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Grid:
    """A parsed time grid: kind 'uniform' | 'shift' | 'edm' | 'flowmatch' and its parameter."""

    kind: str
    param: float | None = None

    @classmethod
    def parse(cls, text: object) -> Grid:
        m = _GRID_RE.fullmatch(text) if isinstance(text, str) else None
        if m is None:
            raise SchemaError(expected(GRID_SYNTAX, text))
        if m.group(1):
            return cls("uniform")
        if m.group(6):
            return cls("flowmatch")
        if m.group(2):
            shift = float(m.group(3))
            if not 0.05 <= shift <= 100:
                raise SchemaError(expected(GRID_SYNTAX, text))
            return cls("shift", shift)
        rho = float(m.group(5)) if m.group(5) else EDM_RHO
        if not 1 <= rho <= 20:
            raise SchemaError(expected(GRID_SYNTAX, text))
        return cls("edm", rho)

    def times(self, steps: int) -> np.ndarray:
        """float32 [steps + 1], strictly increasing from t = 0 (noise) to t = 1 (data)."""
        if self.kind == "uniform":
            return time_grid(steps)  # the old grid, bit for bit: Euler jobs keep their images
        if steps < 1:
            raise SchemaError(expected("steps >= 1", steps))
        if self.kind == "shift":
            sigma = np.linspace(1.0, 0.0, steps + 1)  # uniform in the noise level 1 - t
            sigma = self.param * sigma / (1.0 + (self.param - 1.0) * sigma)
            sigma[0], sigma[-1] = 1.0, 0.0  # exactly noise and data, whatever the rounding of S / S
            return (1.0 - sigma).astype(np.float32)
        if self.kind == "flowmatch":
            sigma = np.linspace(1.0, 1.0 / FLOWMATCH_TRAIN_STEPS, steps)
            return np.concatenate([1.0 - sigma, [1.0]]).astype(np.float32)
        return _edm_times(steps, self.param)

    def describe(self) -> str:
        """Where the steps fall, in a phrase (the web UI's hint under its grid menu)."""
        if self.kind == "uniform":
            return "steps evenly spaced in t"
        if self.kind == "shift":
            if self.param == 1:
                return "shift 1: the uniform grid"
            return f"more steps near the {'noise' if self.param > 1 else 'data'} (shift {self.param:g})"
        if self.kind == "flowmatch":
            return "diffusers' flow-matching timesteps (as Paris samples): near uniform, a short last step"
        return f"dense near the data, where detail forms (Karras, rho {self.param:g})"

    def __str__(self) -> str:
        if self.kind in ("uniform", "flowmatch"):
            return self.kind
        if self.kind == "edm" and self.param == EDM_RHO:
            return "edm"
        return f"{self.kind}:{self.param:g}"


def _edm_times(steps: int, rho: float) -> np.ndarray:
    """t = 0, then steps - 1 points of the rho-schedule in sigma = (1 - t) / t, then t = 1."""
    if steps == 1:
        return np.array([0.0, 1.0], np.float32)
    ramp = np.linspace(0.0, 1.0, steps - 1)
    lo, hi = EDM_SIGMA_MIN ** (1 / rho), EDM_SIGMA_MAX ** (1 / rho)
    sigma = (hi * (1 - ramp) + lo * ramp) ** rho
    return np.concatenate([[0.0], 1.0 / (1.0 + sigma), [1.0]]).astype(np.float32)


@dataclass(frozen=True, eq=False)
class SolverHistory:
    """The velocities a multistep solver reuses: at most `Solver.history` of them, oldest first, each
    float32 [n, *sample_shape], evaluated at the grid points just before the current step. A one-step
    solver's history is always empty. Stored beside x in a job's resume state."""

    velocities: tuple[np.ndarray, ...] = ()

    def push(self, v: np.ndarray, keep: int) -> SolverHistory:
        """The history after a step whose first evaluation was v, keeping the newest `keep`."""
        if keep == 0:
            return SolverHistory()
        return SolverHistory((*self.velocities, v)[-keep:])

    def to_list(self) -> list[np.ndarray]:
        return list(self.velocities)

    @classmethod
    def from_list(cls, arrays: object, solver: Solver, shape: tuple[int, ...], step: int) -> SolverHistory:
        """Decoded history of a job `step` steps in, checked against the job's solver and x's shape: it
        must hold exactly the velocities the solver reuses there (min(step, Solver.history)). A state that
        does not fit the job is refused, not stepped on at a lower order or with the wrong velocities."""
        count = min(step, solver.history)
        want = f"a list of {count} velocities for solver {solver} after step {step}"
        if not isinstance(arrays, list | tuple):
            raise SchemaError(expected(want, type(arrays).__name__))
        if len(arrays) != count:
            raise SchemaError(expected(want, f"{len(arrays)} of them"))
        for v in arrays:
            if not isinstance(v, np.ndarray) or v.dtype != np.float32 or v.shape != shape:
                got = (getattr(v, "dtype", type(v).__name__), getattr(v, "shape", None))
                raise SchemaError(expected(f"float32 velocities of shape {shape}", got))
        return cls(tuple(arrays))


# What a deployment serves when its file says nothing: every solver and these grids, Euler on the
# uniform grid by default (the images jobs have always had). A descriptor without "sampling" (a router
# from before solvers) serves LEGACY_OFFER: Euler on the uniform grid only.
OFFERED_GRIDS = ("uniform", "shift:3", "edm")


@dataclass(frozen=True)
class SamplingOffer:
    """The solvers and grids a deployment serves (canonical spellings), and what a job that names
    none gets. Written in the deployment file's [sampling] table and the descriptor's "sampling"."""

    solvers: tuple[str, ...] = tuple(SOLVERS)
    grids: tuple[str, ...] = OFFERED_GRIDS
    default_solver: str = DEFAULT_SOLVER
    default_grid: str = DEFAULT_GRID

    def __post_init__(self) -> None:
        for what, names, parse in (
            ("solvers", self.solvers, Solver.parse),
            ("grids", self.grids, Grid.parse),
        ):
            if not isinstance(names, tuple) or not names:
                raise SchemaError(expected(f"sampling {what} as a non-empty list", names))
            for name in names:
                if str(parse(name)) != name:
                    raise SchemaError(expected(f"sampling {what} in canonical spelling", name))
        self.check(self.default_solver, self.default_grid, "sampling default_")

    def check(self, solver: str | None, grid: str | None, what: str = "") -> None:
        """Refuse a solver or grid this deployment does not serve, listing the ones it does."""
        if solver is not None and str(Solver.parse(solver)) not in self.solvers:
            raise SchemaError(expected(f"{what}solver one of {', '.join(self.solvers)}", solver))
        if grid is not None and str(Grid.parse(grid)) not in self.grids:
            raise SchemaError(expected(f"{what}grid one of {', '.join(self.grids)}", grid))

    def to_dict(self) -> dict:
        return {
            "solvers": list(self.solvers),
            "grids": list(self.grids),
            "default_solver": self.default_solver,
            "default_grid": self.default_grid,
        }

    @classmethod
    def from_dict(cls, d: object) -> SamplingOffer:
        """A [sampling] table or a descriptor's "sampling": every key optional, nothing else allowed."""
        keys = {"solvers", "grids", "default_solver", "default_grid"}
        if not isinstance(d, dict) or set(d) - keys:
            got = sorted(set(d) - keys) if isinstance(d, dict) else type(d).__name__
            raise SchemaError(expected(f"sampling with keys among {sorted(keys)}", got))
        fields = dict(d)
        for key in ("solvers", "grids"):
            if key in fields:
                if not isinstance(fields[key], list):
                    raise SchemaError(expected(f"sampling {key} as a list", fields[key]))
                fields[key] = tuple(fields[key])
        return cls(**fields)


LEGACY_OFFER = SamplingOffer(solvers=(DEFAULT_SOLVER,), grids=(DEFAULT_GRID,))
