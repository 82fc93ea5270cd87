"""How a solver steps: which (x, t) each evaluation of a step sees, and how the step's velocities and
the solver's history become the next x. Pure functions of their arguments (no hidden counter), so the
two drivers share them: the local sampler calls an expert at each stage point, the router worker sends
the same point's rows over RabbitMQ and routes them first. Routing happens at every evaluation.

A step i goes from grid[i] to grid[i + 1] in `solver.stages` evaluations:
    for stage in range(solver.stages):
        x_eval, t_eval = stage_point(solver, grid, i, x, velocities)
        velocities.append(v(x_eval, t_eval))
    x = finish(solver, grid, i, x, velocities, history)
    history = history.push(velocities[0], solver.history)

Names and grids: ddm.schema.solver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ddm.schema.flow import euler_step
from ddm.schema.solver import Solver, SolverHistory


def stage_point(
    solver: Solver, grid: np.ndarray, i: int, x: np.ndarray, velocities: Sequence[np.ndarray]
) -> tuple[np.ndarray, float]:
    """The x (float32) and t the next evaluation of step i sees, after `velocities` (this step's
    evaluations so far, in order)."""
    stage = len(velocities)
    if not 0 <= stage < solver.stages:
        raise ValueError(f"expected a stage in 0..{solver.stages - 1} for {solver}, got {stage}")
    t_now, t_next = float(grid[i]), float(grid[i + 1])
    if stage == 0:
        return x, t_now
    h = t_next - t_now
    if solver.name == "heun":  # the corrector's slope at the Euler predictor
        return (x + h * velocities[0]).astype(np.float32), t_next
    # midpoint: the slope half an Euler step on
    return (x + (h / 2) * velocities[0]).astype(np.float32), t_now + h / 2


def finish(
    solver: Solver,
    grid: np.ndarray,
    i: int,
    x: np.ndarray,
    velocities: Sequence[np.ndarray],
    history: SolverHistory,
) -> np.ndarray:
    """x at grid[i + 1] (float32) from x at grid[i] and the step's evaluations."""
    if len(velocities) != solver.stages:
        raise ValueError(f"expected {solver.stages} velocities for {solver}, got {len(velocities)}")
    if solver.name == "euler":
        # the exact expression the sampler has always used: Euler jobs keep their images bit for bit
        return euler_step(x, velocities[0], grid[i], grid[i + 1]).astype(np.float32)
    h = float(grid[i + 1]) - float(grid[i])
    if solver.name == "heun":
        return (x + (h / 2) * (velocities[0] + velocities[1])).astype(np.float32)
    if solver.name == "midpoint":
        return (x + h * velocities[1]).astype(np.float32)
    # Adams-Bashforth: the earlier steps' velocities, then this one's, at their grid points
    used = history.velocities
    if len(used) > i:
        raise ValueError(f"expected at most {i} earlier velocities at step {i}, got {len(used)}")
    nodes = np.asarray(grid[i - len(used) : i + 1], np.float64)
    weights = adams_bashforth_weights(nodes, float(grid[i + 1]))
    step = sum(w * v for w, v in zip(weights, (*used, velocities[0]), strict=True))
    return (x + step).astype(np.float32)


def adams_bashforth_weights(nodes: np.ndarray, t_next: float) -> np.ndarray:
    """w_j = integral from nodes[-1] to t_next of the Lagrange basis polynomial of nodes[j]: the
    weights of the velocities at `nodes` (oldest first) in x(t_next) = x(nodes[-1]) + sum_j w_j v_j.
    Exact for any grid spacing; on a uniform grid of step h they are h * (3/2, -1/2) for two nodes and
    h * (23/12, -16/12, 5/12) for three, reversed to oldest first."""
    if len(nodes) == 1:  # Euler: the one velocity held over the step
        return np.array([t_next - nodes[0]])
    origin = nodes[-1]
    shifted = nodes - origin  # integrate near 0: the polynomial coefficients stay well scaled
    weights = np.empty(len(nodes))
    for j, node in enumerate(shifted):
        others = np.delete(shifted, j)
        basis = np.polynomial.Polynomial.fromroots(others) / np.prod(node - others)
        weights[j] = basis.integ()(t_next - origin)
    return weights


def integrate(
    velocity: Callable[[np.ndarray, float], np.ndarray],
    x: np.ndarray,
    grid: np.ndarray,
    solver: Solver,
) -> tuple[np.ndarray, int]:
    """x at grid[-1] and the number of evaluations, for one velocity function v(x, t) (the known-answer
    tests' driver; the samplers drive the same stage_point/finish with routing in between)."""
    history = SolverHistory()
    nfe = 0
    for i in range(len(grid) - 1):
        velocities: list[np.ndarray] = []
        for _ in range(solver.stages):
            x_eval, t_eval = stage_point(solver, grid, i, x, velocities)
            velocities.append(velocity(x_eval, t_eval))
            nfe += 1
        x = finish(solver, grid, i, x, velocities, history)
        history = history.push(velocities[0], solver.history)
    return x, nfe
