"""Known-answer tests for the solvers and grids: a Gaussian data distribution, whose flow-matching
velocity and flow are exact in closed form, integrated by every solver on every grid family."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.router.policies import build_policy
from ddm.router.sampler import sample_local
from ddm.router.solvers import adams_bashforth_weights, finish, integrate, stage_point
from ddm.schema.codec import packb, unpackb
from ddm.schema.errors import SchemaError
from ddm.schema.flow import euler_step, time_grid
from ddm.schema.messages import JobSpec
from ddm.schema.solver import SOLVERS, Grid, Solver, SolverHistory
from tests.support.descriptors import demo_descriptor

MU = np.array([0.7, -1.2], np.float64)  # data ~ N(MU, S^2) per coordinate
S = np.array([0.3, 0.05], np.float64)


def velocity(x: np.ndarray, t: float) -> np.ndarray:
    """E[x1 - x0 | x_t] for x1 ~ N(MU, S^2), x0 ~ N(0, 1), x_t = t x1 + (1 - t) x0."""
    var = t**2 * S**2 + (1 - t) ** 2
    return (MU + (t * S**2 - (1 - t)) / var * (x - t * MU)).astype(np.float32)


def exact(z: np.ndarray, t: float) -> np.ndarray:
    """The flow from x(0) = z: x(t) = t MU + sqrt(t^2 S^2 + (1 - t)^2) z (affine, so exact)."""
    return t * MU + np.sqrt(t**2 * S**2 + (1 - t) ** 2) * z


Z = np.random.default_rng(0).standard_normal((64, 2))


def error(solver: str, steps: int, grid: str = "uniform") -> float:
    x, _ = integrate(velocity, Z.astype(np.float32), Grid.parse(grid).times(steps), Solver.parse(solver))
    return float(np.abs(x - exact(Z, 1.0)).max())


def test_the_closed_form_is_the_flow_of_its_velocity():
    t, h = 0.4, 1e-4
    derivative = (exact(Z, t + h) - exact(Z, t - h)) / (2 * h)
    np.testing.assert_allclose(velocity(exact(Z, t), t), derivative, atol=1e-4)


@pytest.mark.parametrize(("solver", "order"), [("euler", 1), ("heun", 2), ("midpoint", 2), ("ab2", 2)])
def test_each_solver_converges_at_its_order(solver, order):
    # at least the order (midpoint happens to do better on this field); a broken second-order stage
    # falls back to Euler's first order and fails
    # (at 32 -> 64 steps: the data's 0.05 spread makes the field stiff near t = 1, so fewer steps are
    # not yet in the asymptotic regime)
    coarse, fine = error(solver, 32), error(solver, 64)
    assert np.log2(coarse / fine) > order - 0.3


def test_ab3_is_at_least_second_order_and_beats_ab2():
    # bootstrapped by AB1 and AB2, whose first steps' local errors bound the global order at 2
    assert np.log2(error("ab3", 32) / error("ab3", 64)) > 1.8
    assert error("ab3", 32) < error("ab2", 32)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("grid", ["uniform", "shift:3", "shift:0.5", "edm"])
def test_every_solver_reaches_the_exact_flow_on_every_grid(solver, grid):
    assert error(solver, 200, grid) < 0.02


def test_higher_order_beats_euler_at_equal_evaluations():
    euler_16 = error("euler", 16)
    assert error("heun", 8) < euler_16 and error("midpoint", 8) < euler_16
    assert error("ab2", 32) < error("euler", 32) / 2


def test_the_uniform_grid_and_euler_are_the_old_sampler_bit_for_bit():
    grid = Grid.parse("uniform").times(50)
    np.testing.assert_array_equal(grid, time_grid(50))
    x = Z.astype(np.float32)
    v = velocity(x, float(grid[3]))
    old = euler_step(x, v, grid[3], grid[4]).astype(np.float32)
    np.testing.assert_array_equal(finish(Solver("euler"), grid, 3, x, [v], SolverHistory()), old)


def test_adams_bashforth_weights_on_a_uniform_grid_are_the_textbook_ones():
    h = 0.1
    np.testing.assert_allclose(adams_bashforth_weights(np.array([0.0, h]), 2 * h), h * np.array([-0.5, 1.5]))
    nodes = np.array([0.0, h, 2 * h])
    np.testing.assert_allclose(adams_bashforth_weights(nodes, 3 * h), h * np.array([5, -16, 23]) / 12)
    np.testing.assert_allclose(adams_bashforth_weights(np.array([0.3]), 0.5), [0.2])


def test_stage_points():
    grid = np.array([0.0, 0.5, 1.0], np.float32)
    x, v0 = np.ones(2, np.float32), np.full(2, 2.0, np.float32)
    assert stage_point(Solver("heun"), grid, 0, x, [])[1] == 0.0
    x_eval, t_eval = stage_point(Solver("heun"), grid, 0, x, [v0])
    assert t_eval == 0.5 and np.allclose(x_eval, 2.0)
    x_eval, t_eval = stage_point(Solver("midpoint"), grid, 0, x, [v0])
    assert t_eval == 0.25 and np.allclose(x_eval, 1.5)
    with pytest.raises(ValueError, match="stage"):
        stage_point(Solver("euler"), grid, 0, x, [v0])


@pytest.mark.parametrize(
    ("solver", "per_step"), [("euler", 1), ("heun", 2), ("midpoint", 2), ("ab2", 1), ("ab3", 1)]
)
def test_evaluations_are_counted(solver, per_step):
    _, nfe = integrate(velocity, Z.astype(np.float32), time_grid(6), Solver.parse(solver))
    assert nfe == Solver.parse(solver).nfe(6) == 6 * per_step


@pytest.mark.parametrize("grid", ["uniform", "shift:3", "shift:0.25", "edm", "edm:3"])
@pytest.mark.parametrize("steps", [1, 2, 7, 50])
def test_grids_run_from_noise_to_data_strictly_increasing(grid, steps):
    t = Grid.parse(grid).times(steps)
    assert t.dtype == np.float32 and t.shape == (steps + 1,)
    assert t[0] == 0.0 and t[-1] == 1.0 and np.all(np.diff(t) > 0)


def test_non_uniform_grids_put_their_steps_where_they_say():
    uniform = np.diff(Grid.parse("uniform").times(10))
    assert np.diff(Grid.parse("shift:3").times(10))[0] < uniform[0]  # denser near the noise
    assert np.diff(Grid.parse("edm").times(10))[-2] < uniform[-2]  # denser near the data


def test_a_multistep_history_survives_the_wire_and_resumes_to_the_same_result():
    solver, grid = Solver("ab3"), Grid.parse("edm").times(12)
    whole, _ = integrate(velocity, Z.astype(np.float32), grid, solver)
    x, history = Z.astype(np.float32), SolverHistory()
    for i in range(len(grid) - 1):
        if i == 5:  # a router crash: only what the resume state holds comes back
            stored = unpackb(packb({"x": x, "history": history.to_list()}))
            x, history = stored["x"], SolverHistory.from_list(stored["history"], solver, x.shape, i)
        v = velocity(*stage_point(solver, grid, i, x, []))
        x = finish(solver, grid, i, x, [v], history)
        history = history.push(v, solver.history)
    np.testing.assert_array_equal(x, whole)


def test_a_history_that_does_not_fit_the_job_is_refused():
    v = np.zeros((4, 2), np.float32)
    with pytest.raises(SchemaError, match="1 velocities for solver ab2 after step 5, got '2 of them'"):
        SolverHistory.from_list([v, v], Solver("ab2"), (4, 2), 5)
    with pytest.raises(SchemaError, match="2 velocities for solver ab3 after step 5, got '1 of them'"):
        SolverHistory.from_list([v], Solver("ab3"), (4, 2), 5)  # truncated: would step at a lower order
    with pytest.raises(SchemaError, match=r"float32 velocities of shape \(4, 3\)"):
        SolverHistory.from_list([v], Solver("ab2"), (4, 3), 1)
    with pytest.raises(SchemaError, match="0 velocities"):
        SolverHistory.from_list([v], Solver("euler"), (4, 2), 3)
    assert len(SolverHistory.from_list([v], Solver("ab3"), (4, 2), 1).velocities) == 1


@pytest.mark.parametrize("text", ["rk4", "", None, 3, "Euler"])
def test_an_unknown_solver_is_refused_naming_the_known_ones(text):
    with pytest.raises(SchemaError, match="euler, heun, midpoint, ab2, ab3"):
        Solver.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "linear",
        "shift:0",
        "shift:-1",
        "shift:",
        "shift:0.001",
        "shift:1e-05",
        "shift:1.234",
        "edm:30",
        "edm:0.1",
        "edm:x",
        None,
    ],
)
def test_a_bad_grid_is_refused_saying_the_syntax(text):
    with pytest.raises(SchemaError, match="'uniform', 'shift:S'"):
        Grid.parse(text)


@pytest.mark.parametrize("text", ["uniform", "shift:3", "shift:0.5", "edm", "edm:3"])
def test_grid_names_round_trip(text):
    assert str(Grid.parse(text)) == text


@pytest.mark.parametrize(
    "text", ["shift:0.05", "shift:0.07", "shift:100", "shift:99.99", "edm:1", "edm:20", "edm:1.25"]
)
def test_every_accepted_grid_spells_itself_in_a_form_it_reads_back(text):
    grid = Grid.parse(text)
    assert Grid.parse(str(grid)) == grid  # a JobSpec normalises its grid: decode must accept the result


@pytest.mark.parametrize("text", ["shift:0.05", "shift:100", "edm:1", "edm:20"])
def test_grids_stay_strictly_increasing_at_their_parameter_extremes(text):
    for steps in (2, 10, 1000):
        t = Grid.parse(text).times(steps)
        assert t[0] == 0.0 and t[-1] == 1.0 and np.all(np.diff(t) > 0), (text, steps)


def test_a_job_parses_its_solver_and_grid_once_not_per_step(monkeypatch):
    """ResolvedJob carries the parsed solver and grid (issue 41: Solver.parse ran about 5 times per step
    of the local sampler, the router's code). A 4-step and an 8-step job parse equally often."""
    calls = []
    real = Solver.parse.__func__
    monkeypatch.setattr(Solver, "parse", classmethod(lambda cls, text: calls.append(text) or real(cls, text)))
    label_counts = np.array([[1] * 5 + [0] * 5, [0] * 5 + [1] * 5], np.int64)  # experts 0-4 and 5-9
    policy = build_policy("oracle", label_counts)
    still = lambda x, t, y, g: np.zeros_like(x)  # noqa: E731 - a velocity under which nothing moves
    counts = []
    for steps in (4, 8):
        calls.clear()
        job = demo_descriptor().resolve(JobSpec.new([1], steps=steps, seed=0, solver="heun"))
        sample_local({0: still, 1: still}, policy, job)
        counts.append(len(calls))
    assert counts[0] == counts[1], f"Solver.parse calls for 4 and 8 steps: {counts}"
