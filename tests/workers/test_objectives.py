"""Known-answer tests of the objective conversion (workers/objectives.py).

Data x1 ~ N(mu, s^2 I), noise x0 ~ N(0, I): the exact denoiser and the exact flow velocity are closed
form. Under x = alpha x1 + sigma eps, with D = alpha^2 s^2 + sigma^2:
    E[x1 | x] = mu + alpha s^2 (x - alpha mu) / D,   E[eps | x] = sigma (x - alpha mu) / D
and the deployment's x_t = t x1 + (1 - t) x0 is the same with alpha = t, sigma = 1 - t, whose exact
velocity is E[x1 | x_t] - E[x0 | x_t]. An exact "expert" of each objective answers from these formulas
at its own time; converted, it must give the exact velocity. A perturbed conversion must not.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ddm.schema.expert_card import FLOW, T0_DATA, T0_NOISE, ExpertCard, Objective, Schedule
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers import objectives as obj
from ddm.workers.expert import Expert
from ddm.workers.objectives import TAU_RANGE, alpha_sigma, conversion_for, training_example

SHAPE = (2, 3, 3)
RNG = np.random.default_rng(0)
MU = RNG.uniform(-0.6, 0.6, size=SHAPE)
S = 0.35  # data standard deviation
SCHEDULES = [
    Schedule.make("linear"),
    Schedule.make("linear", beta_min=0.05, beta_max=25.0),
    Schedule.make("cosine"),
]
DDPM = ("ddpm-eps", "ddpm-x0", "ddpm-v")
T_INSIDE = np.linspace(0.01, 0.985, 60)  # every schedule's matched tau lies inside TAU_RANGE here
T_ENDS = np.array([0.0, 1e-4, 1e-3, 0.995, 0.9999, 1.0])


def posterior(x, alpha, sigma, mu=MU):
    """(E[x1 | x], E[eps | x]) for x = alpha x1 + sigma eps; alpha, sigma broadcast against x."""
    d = alpha**2 * S**2 + sigma**2
    return mu + alpha * S**2 * (x - alpha * mu) / d, sigma * (x - alpha * mu) / d


def col(a, x):
    return np.asarray(a, dtype=np.float64).reshape((-1,) + (1,) * (x.ndim - 1))


def exact_velocity(x_t, t, mu=MU):
    x1, x0 = posterior(x_t.astype(np.float64), col(t, x_t), 1 - col(t, x_t), mu)
    return x1 - x0


def exact_expert(objective: Objective, mu=MU):
    """predict(x, time input) of a perfect expert of `objective` (float32 in and out, like a network)."""

    def predict(x, time_in):
        x = x.astype(np.float64)
        time_in = np.asarray(time_in, dtype=np.float64)
        if objective.name == "flow-velocity":
            t = time_in if objective.time_convention == T0_NOISE else 1 - time_in
            v = exact_velocity(x, t, mu)
            return (v if objective.time_convention == T0_NOISE else -v).astype(np.float32)
        tau = time_in if objective.time_convention == T0_DATA else 1 - time_in
        alpha, sigma = (col(a, x) for a in alpha_sigma(objective.schedule, tau))
        x1, eps = posterior(x, alpha, sigma, mu)
        out = {"ddpm-eps": eps, "ddpm-x0": x1, "ddpm-v": alpha * eps - sigma * x1}[objective.name]
        return out.astype(np.float32)

    return predict


def states(t):
    """x_t float32 [len(t), *SHAPE] drawn from the deployment's interpolant."""
    rng = np.random.default_rng(1)
    x1 = MU + S * rng.standard_normal((len(t), *SHAPE))
    x0 = rng.standard_normal((len(t), *SHAPE))
    tc = col(t, x1)
    return (tc * x1 + (1 - tc) * x0).astype(np.float32)


def converted(objective, t, mu=MU):
    t = np.asarray(t, dtype=np.float32)
    x_t = states(t)
    return conversion_for(objective).velocity(exact_expert(objective, mu), x_t, t), exact_velocity(x_t, t, mu)


ALL_DDPM = [
    pytest.param(Objective(name, sched, tc), id=f"{name}-{sched.name}{i}-{tc}")
    for name in DDPM
    for i, sched in enumerate(SCHEDULES)
    for tc in (T0_NOISE, T0_DATA)
]


@pytest.mark.parametrize("objective", ALL_DDPM)
def test_every_ddpm_objective_converts_to_the_exact_velocity(objective):
    got, want = converted(objective, T_INSIDE)
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("objective", ALL_DDPM)
def test_endpoints_are_finite_and_close(objective):
    """t = 0 and t = 1 (and near them): tau is clipped into TAU_RANGE; the answer stays finite, and the
    well-conditioned estimate keeps it near the exact velocity. Not exact: at t = 1 the expert runs at
    tau_min, where it believes x holds noise sigma ~ 0.01 (linear) and attributes some of x1 - mu to it
    (about sigma / s^2 |x1 - mu| here); at t = 0 it runs at tau_max, where alpha is not quite 0."""
    got, want = converted(objective, T_ENDS)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=0.1)
    inside = converted(objective, np.array([0.05, 0.5, 0.95]))
    np.testing.assert_allclose(*inside, atol=2e-5, rtol=1e-5)


def test_flow_velocity_t0_data_is_mirrored_and_negated():
    got, want = converted(Objective("flow-velocity", None, T0_DATA), np.linspace(0, 1, 41))
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_flow_velocity_t0_noise_is_the_identity():
    assert conversion_for(FLOW) is None
    assert FLOW.is_identity and not Objective("flow-velocity", None, T0_DATA).is_identity


def test_matched_tau_has_the_deployments_snr():
    t = T_INSIDE
    for sched in SCHEDULES:
        tau, r = obj.matched_tau(sched, t)
        alpha, sigma = alpha_sigma(sched, tau)
        np.testing.assert_allclose(alpha**2 + sigma**2, 1.0, atol=1e-12)
        np.testing.assert_allclose(alpha / sigma, t / (1 - t), rtol=1e-9)
        np.testing.assert_allclose(alpha, t / r, rtol=1e-9)
    tau, _ = obj.matched_tau(SCHEDULES[0], np.array([0.0, 1.0]))
    assert tau.tolist() == [TAU_RANGE[1], TAU_RANGE[0]]  # the endpoints clip into the schedule's range


# -- a perturbed conversion must fail the known answer ------------------------------------------------


def _eps_sign(name, p, x_s, alpha, sigma):
    if name == "ddpm-eps":
        return (x_s + sigma * p) / alpha, p
    return ESTIMATES(name, p, x_s, alpha, sigma)


def _x0_missing_alpha(name, p, x_s, alpha, sigma):
    if name == "ddpm-x0":
        return p, (x_s - p) / sigma
    return ESTIMATES(name, p, x_s, alpha, sigma)


def _v_swapped(name, p, x_s, alpha, sigma):
    if name == "ddpm-v":
        return alpha * x_s + sigma * p, sigma * x_s - alpha * p
    return ESTIMATES(name, p, x_s, alpha, sigma)


ESTIMATES = obj.estimates
MATCHED = obj.matched_tau
TIME_INPUT = obj.time_input

PERTURBATIONS = [
    pytest.param("estimates", _eps_sign, Objective("ddpm-eps", SCHEDULES[0]), id="eps-wrong-sign"),
    pytest.param("estimates", _x0_missing_alpha, Objective("ddpm-x0", SCHEDULES[2]), id="x0-missing-alpha"),
    pytest.param("estimates", _v_swapped, Objective("ddpm-v", SCHEDULES[0], T0_DATA), id="v-wrong-signs"),
    pytest.param(
        "matched_tau",
        lambda sched, t: (MATCHED(sched, t)[0], np.ones_like(np.asarray(t, np.float64))),
        Objective("ddpm-eps", SCHEDULES[1]),
        id="x-not-rescaled",
    ),
    pytest.param(
        "matched_tau",
        lambda sched, t: (np.clip(1 - np.asarray(t, np.float64), *TAU_RANGE), MATCHED(sched, t)[1]),
        Objective("ddpm-v", SCHEDULES[0]),
        id="tau-not-snr-matched",
    ),
    pytest.param(
        "time_input",
        lambda objective, tau: np.asarray(tau, np.float64),
        Objective("ddpm-x0", SCHEDULES[0], T0_NOISE),
        id="time-not-mirrored",
    ),
    pytest.param(
        "velocity_from_estimates",
        lambda x1, x0, x_t, t: x1 + x0,
        Objective("ddpm-eps", SCHEDULES[2], T0_DATA),
        id="x1-plus-x0",
    ),
]


@pytest.mark.parametrize("name, perturbed, objective", PERTURBATIONS)
def test_a_perturbed_conversion_fails_the_known_answer(monkeypatch, name, perturbed, objective):
    monkeypatch.setattr(obj, name, perturbed)
    got, want = converted(objective, T_INSIDE)
    assert np.abs(got - want).max() > 1e-2


def test_flow_t0_data_without_the_negation_fails(monkeypatch):
    objective = Objective("flow-velocity", None, T0_DATA)
    t = np.linspace(0.05, 0.95, 19).astype(np.float32)
    x_t = states(t)
    flip = exact_expert(objective)
    got = conversion_for(objective).velocity(lambda x, s: -flip(x, s), x_t, t)
    assert np.abs(got - exact_velocity(x_t, t)).max() > 1e-2


# -- training examples: the same objective read backwards ---------------------------------------------


@pytest.mark.parametrize("objective", [pytest.param(FLOW, id="flow")] + ALL_DDPM[::2])
def test_training_example_target_is_what_the_conversion_reads(objective):
    rng = np.random.default_rng(3)
    x1 = rng.standard_normal((8, *SHAPE)).astype(np.float32)
    noise = rng.standard_normal((8, *SHAPE)).astype(np.float32)
    u = rng.random(8, dtype=np.float32)
    x, time_in, target = training_example(objective, x1, noise, u)
    assert x.dtype == time_in.dtype == target.dtype == np.float32 and x.shape == x1.shape
    if objective.name == "flow-velocity":
        np.testing.assert_allclose(target, x1 - noise, atol=1e-6)
        np.testing.assert_allclose(x, col(time_in, x1) * x1 + (1 - col(time_in, x1)) * noise, atol=1e-6)
        return
    tau = (
        time_in.astype(np.float64) if objective.time_convention == T0_DATA else 1 - time_in.astype(np.float64)
    )
    assert (tau >= TAU_RANGE[0] - 1e-6).all() and (tau <= TAU_RANGE[1] + 1e-6).all()
    alpha, sigma = (col(a, x1) for a in alpha_sigma(objective.schedule, tau))
    np.testing.assert_allclose(x, alpha * x1 + sigma * noise, atol=1e-5)
    x1_hat, x0_hat = obj.estimates(
        objective.name, target.astype(np.float64), x.astype(np.float64), alpha, sigma
    )
    np.testing.assert_allclose(x1_hat, x1, atol=2e-3)
    np.testing.assert_allclose(x0_hat, noise, atol=2e-3)


@pytest.mark.parametrize("schedule", SCHEDULES[::2], ids=["linear", "cosine"])
def test_a_low_snr_data_estimate_is_clipped_into_the_value_range(schedule):
    """An eps expert 0.1 off near the noise end: its x1 estimate is that error over alpha (alpha is
    0.0067 at the linear schedule's tau_max, 0.0016 at the cosine's), far outside the data's range.
    Clipped into the value range, v = (x1^ - x_t) / (1 - t) stays within what the range allows; an
    exact expert whose estimate lies in the range is unchanged (the known answer still holds)."""
    objective = Objective("ddpm-eps", schedule, T0_NOISE)
    t = np.array([0.0, 0.001, 0.01], np.float32)
    x_t = states(t)
    exact = exact_expert(objective)

    def off(x, s):
        return exact(x, s) + np.float32(0.1)

    free = conversion_for(objective).velocity(off, x_t, t)
    clipped = conversion_for(objective, (-2.0, 2.0)).velocity(off, x_t, t)
    bound = (2.0 + np.abs(x_t)) / (1 - col(t, x_t))
    assert (np.abs(clipped) <= bound + 1e-5).all()
    assert np.abs(free).max() > 3 * bound.max()  # what the clip prevents
    inside = np.array([0.05, 0.5, 0.95], np.float32)
    got = conversion_for(objective, (-2.0, 2.0)).velocity(exact, states(inside), inside)
    np.testing.assert_allclose(got, exact_velocity(states(inside), inside), atol=2e-5, rtol=1e-5)


# -- through Expert.velocity: the one door --------------------------------------------------------------

LABEL_MEANS = np.stack([MU, -MU, 0.5 * MU])  # a different Gaussian per label; label 2 is the null class
# the Gaussian data reach about +-1.8 (|mu| + 3 s): the declared range holds them, so the data estimate
# is never clipped here (the clip is tested on its own below)
SPACE = SampleSpace(SHAPE, (-3.0, 3.0), num_classes=2, class_names=("a", "b"))


class ExactExpert(Expert):
    """An Expert whose `_forward` is the exact prediction of its card's objective, per label."""

    def __init__(self, objective: Objective):
        card = ExpertCard("torch", objective=objective, sample_space=SPACE)
        self.meta = SimpleNamespace(framework="torch", card=card)
        self.calls = 0

    def _forward(self, x, t, y):
        self.calls += 1
        out = np.empty_like(x)
        for label in np.unique(y):
            rows = y == label
            out[rows] = exact_expert(self.card.objective, LABEL_MEANS[label])(x[rows], t[rows])
        return out


def guided_exact(x_t, t, y, g):
    v_y = np.stack(
        [exact_velocity(x_t[i : i + 1], t[i : i + 1], LABEL_MEANS[y[i]])[0] for i in range(len(y))]
    )
    v_null = exact_velocity(x_t, t, LABEL_MEANS[2])
    return v_null + col(g, x_t) * (v_y - v_null)


@pytest.mark.parametrize("objective", ALL_DDPM[::3] + [pytest.param(FLOW, id="flow")])
def test_expert_velocity_converts_then_guides(objective):
    """Guidance commutes with the conversion: it is affine in the prediction for fixed x and t."""
    t = np.linspace(0.02, 0.97, 12).astype(np.float32)
    x_t = states(t)
    y = np.array([0, 1, 2] * 4, dtype=np.int64)
    g = np.array([1.0, 1.5, 3.0, 0.0] * 3, dtype=np.float32)
    expert = ExactExpert(objective)
    got = expert.velocity(x_t, t, y, guidance=g)
    assert expert.calls == 1  # the null rows ride in the same forward pass
    np.testing.assert_allclose(got, guided_exact(x_t, t, y, g), atol=5e-5, rtol=1e-5)
    if objective.name == "flow-velocity":
        return
    # converting the guided raw prediction gives the same answer
    conv = conversion_for(objective)
    guided_rows = g != 1.0
    raw_null = {}

    def predict_guided(x, s):
        p_y = np.stack(
            [exact_expert(objective, LABEL_MEANS[y[i]])(x[i : i + 1], s[i : i + 1])[0] for i in range(len(y))]
        )
        raw_null["p"] = exact_expert(objective, LABEL_MEANS[2])(x, s)
        return raw_null["p"] + col(g, x) * (p_y - raw_null["p"])

    both = conv.velocity(predict_guided, x_t, t)
    np.testing.assert_allclose(both[guided_rows], got[guided_rows], atol=5e-5, rtol=1e-5)


def test_identity_expert_answers_the_networks_bits():
    """flow-velocity / t0-noise: Expert.velocity returns exactly what _forward returned (no arithmetic)."""

    class Raw(ExactExpert):
        def _forward(self, x, t, y):
            return (x * np.float32(1.2345) + t[:, None, None, None]).astype(np.float32)

    expert = Raw(FLOW)
    x_t = states(np.linspace(0, 1, 5))
    t = np.linspace(0, 1, 5).astype(np.float32)
    y = np.zeros(5, np.int64)
    assert np.array_equal(expert.velocity(x_t, t, y), expert._forward(x_t, t, y))


def test_expert_checks_inputs_against_its_sample_space():
    from ddm.schema.errors import SchemaError

    expert = ExactExpert(FLOW)
    with pytest.raises(SchemaError, match=r"float32 \[B, 2, 3, 3\]"):
        expert.velocity(np.zeros((1, *LEGACY.shape), np.float32), [0.5], [0])
    with pytest.raises(SchemaError, match=r"labels in \[0, 2\]"):
        expert.velocity(np.zeros((1, *SHAPE), np.float32), [0.5], [3])


def test_a_zero_d_t_or_guidance_array_is_refused_not_taken_for_one_row():
    """The schema says t [B] and guidance [B] (or a number for every row): a 0-d array used to pass as
    [1] (issue 36)."""
    from ddm.schema.errors import SchemaError

    expert = ExactExpert(FLOW)
    x = np.zeros((1, *SHAPE), np.float32)
    with pytest.raises(SchemaError, match=r"expected t \[B=1\], got \(\)"):
        expert.velocity(x, np.float32(0.5), [0])
    with pytest.raises(SchemaError, match=r"expected guidance, a number or \[B=1\], got \(\)"):
        expert.velocity(x, [0.5], [0], guidance=np.array(2.0, np.float32))
    plain = expert.velocity(x, [0.5], [0], guidance=2.0)  # a number is every row's guidance
    assert np.array_equal(plain, expert.velocity(x, [0.5], [0], guidance=np.array([2.0], np.float32)))
