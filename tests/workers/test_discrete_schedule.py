"""The discrete-linear schedule (DDPM's 1000 steps, as DiT was trained): the card's record and its
conversion to the deployment's velocity (workers/objectives.py, "Discrete schedules").

Known answer as in tests/workers/test_objectives.py: data x1 ~ N(mu, s^2 I), so an exact eps "expert"
at its own step index and the exact flow velocity are both closed form; converted, one must give the
other.
"""

from __future__ import annotations

import numpy as np
import pytest

from ddm.schema.errors import SchemaError
from ddm.schema.expert_card import T0_DATA, T0_NOISE, ExpertCard, Objective, Schedule
from ddm.workers import objectives as obj

DDPM_1000 = Schedule.make("discrete-linear", beta_start=1e-4, beta_end=0.02, steps=1000)
SHAPE = (2, 3, 3)
MU = np.random.default_rng(0).uniform(-0.6, 0.6, size=SHAPE)
S = 0.35


def test_the_card_records_it_and_refuses_what_is_not_a_discrete_schedule():
    assert Schedule.make("discrete-linear") == DDPM_1000  # the defaults are DiT's
    assert DDPM_1000.time_scale == 999.0 and Schedule.make("linear").time_scale == 1.0
    assert Schedule.parse("discrete-linear:beta_start=0.0001,beta_end=0.02,steps=1000") == DDPM_1000
    objective = Objective("ddpm-eps", DDPM_1000, T0_DATA)
    card = ExpertCard(framework="torch", architecture="dit", objective=objective)
    assert ExpertCard.from_dict(card.to_dict()) == card
    for bad, match in (
        ({"steps": 999.5}, "steps a whole number"),
        ({"steps": 1}, "steps a whole number"),
        ({"beta_start": 0.03}, "beta_start <= beta_end"),
        ({"beta_end": 1.0}, "beta_end < 1"),
        ({"beta_min": 0.1}, "discrete-linear schedule parameters"),
    ):
        with pytest.raises(SchemaError, match=match):
            Schedule.make("discrete-linear", **bad)


def test_alpha_bar_at_whole_steps_is_ddpms():
    """At every whole step alpha^2 is DDPM's alpha_bar (float64, as DiT's gaussian_diffusion builds it),
    and agrees with diffusers' DDPMScheduler (float32) to its precision."""
    from diffusers import DDPMScheduler

    betas = np.linspace(1e-4, 0.02, 1000, dtype=np.float64)
    alpha_bar = np.cumprod(1.0 - betas)
    alpha, sigma = obj.alpha_sigma(DDPM_1000, np.arange(1000) / 999)
    np.testing.assert_allclose(alpha**2, alpha_bar, rtol=1e-12)
    np.testing.assert_allclose(alpha**2 + sigma**2, 1.0, rtol=1e-12)
    theirs = DDPMScheduler(1000, 1e-4, 0.02, "linear").alphas_cumprod.double().numpy()
    np.testing.assert_allclose(alpha**2, theirs, atol=1e-6)


def test_the_inverse_and_the_matched_step():
    tau = np.linspace(0.0, 1.0, 301)
    back = obj.tau_of_log_alpha(DDPM_1000, obj.log_alpha(DDPM_1000, tau))
    np.testing.assert_allclose(back, tau, atol=1e-9)
    t = np.linspace(0.05, 0.95, 31)
    tau, r = obj.matched_tau(DDPM_1000, t)
    alpha, sigma = obj.alpha_sigma(DDPM_1000, tau)
    np.testing.assert_allclose(alpha / sigma, t / (1 - t), rtol=1e-9)  # the deployment's SNR
    np.testing.assert_allclose(r, np.sqrt(t**2 + (1 - t) ** 2))
    ends, _ = obj.matched_tau(DDPM_1000, np.array([0.0, 1.0]))
    assert ends.tolist() == [1.0, 0.0]  # every step is the network's: clipped to 0 .. 999, not TAU_RANGE
    objective = Objective("ddpm-eps", DDPM_1000, T0_DATA)
    assert obj.time_input(objective, np.array([0.0, 0.5, 1.0])).tolist() == [0.0, 499.5, 999.0]
    flipped = Objective("ddpm-eps", DDPM_1000, T0_NOISE)
    assert obj.time_input(flipped, np.array([0.0, 1.0])).tolist() == [999.0, 0.0]


def exact_eps_expert(objective: Objective):
    """predict(x, step index) of a perfect eps expert under x = alpha x1 + sigma eps."""

    def predict(x, index):
        x = x.astype(np.float64)
        tau = np.asarray(index, np.float64) / objective.schedule.time_scale
        if objective.time_convention == T0_NOISE:
            tau = 1.0 - tau
        alpha, sigma = (a.reshape(-1, 1, 1, 1) for a in obj.alpha_sigma(objective.schedule, tau))
        return (sigma * (x - alpha * MU) / (alpha**2 * S**2 + sigma**2)).astype(np.float32)

    return predict


@pytest.mark.parametrize("convention", [T0_DATA, T0_NOISE])
def test_an_exact_eps_expert_converts_to_the_exact_velocity(convention):
    t = np.linspace(0.01, 0.985, 40).astype(np.float32)
    rng = np.random.default_rng(1)
    x1 = MU + S * rng.standard_normal((len(t), *SHAPE))
    x0 = rng.standard_normal((len(t), *SHAPE))
    tc = t.astype(np.float64).reshape(-1, 1, 1, 1)
    x_t = (tc * x1 + (1 - tc) * x0).astype(np.float32)
    d = tc**2 * S**2 + (1 - tc) ** 2  # the exact velocity E[x1 | x_t] - E[x0 | x_t]
    xt = x_t.astype(np.float64)
    want = MU + tc * S**2 * (xt - tc * MU) / d - (1 - tc) * (xt - tc * MU) / d
    objective = Objective("ddpm-eps", DDPM_1000, convention)
    got = obj.conversion_for(objective).velocity(exact_eps_expert(objective), x_t, t)
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)
    wrong = Objective("ddpm-eps", Schedule.make("linear"), convention)  # the continuous schedule instead
    assert np.abs(obj.conversion_for(wrong).velocity(exact_eps_expert(objective), x_t, t) - want).max() > 1e-2
