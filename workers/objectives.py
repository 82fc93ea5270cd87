"""Every objective in the deployment's one velocity (pure numpy): the HDDM recipe (arXiv 2603.06741).

The deployment's convention (schema/flow.py): x_t = t x1 + (1 - t) x0, t = 0 noise, t = 1 data, and an
expert answers v = x1 - x0. An expert trained otherwise declares it in its card
(schema/expert_card.py) and is converted here, at the expert, before anything leaves it:

flow-velocity, t0-noise   the identity. `conversion_for` returns None and Expert.velocity runs the
                          network exactly as before: no multiplication by 1, the same bits.
flow-velocity, t0-data    its time runs backwards (s = 1 - t, x = (1 - s) x1 + s x0), so it predicts
                          d x / d s = x0 - x1: run it at (x_t, 1 - t) and negate.
ddpm-* under a VP schedule (alpha_tau^2 + sigma_tau^2 = 1, tau = 0 data, tau = 1 noise):
  1. match the signal-to-noise ratio. x_t has signal t and noise 1 - t; divided by
     r = sqrt(t^2 + (1 - t)^2) it is a VP sample x_s = x_t / r = a x1 + b x0 with a = t / r,
     b = (1 - t) / r, a^2 + b^2 = 1, SNR a^2 / b^2 = t^2 / (1 - t)^2. The expert's own time is the tau
     with alpha_tau = a (schedule inverse in closed form, `tau_of_alpha`), clipped into TAU_RANGE;
     its time input is 1 - tau (t0-noise) or tau (t0-data).
  2. run it: p = expert(x_s, time input).
  3. convert p to the data estimate x1^ and the noise estimate x0^ with its own alpha, sigma at tau:
        eps:  x0^ = p,                  x1^ = (x_s - sigma p) / alpha
        x0:   x1^ = p,                  x0^ = (x_s - alpha p) / sigma
        v:    x1^ = alpha x_s - sigma p, x0^ = sigma x_s + alpha p        (v = alpha eps - sigma x1)
  4. answer v = x1^ - x0^.

Discrete schedules (discrete-linear: DDPM's 1000 steps, DiT's). alpha_tau^2 interpolates the discrete
alpha_bar log-linearly between whole steps at the continuous index i = tau (steps - 1), so both steps
are exact at every tau and the inverse is the same interpolation read backwards; tau is clipped into
[0, 1] (the steps the network was trained on: its index 0 .. steps - 1), not TAU_RANGE; the time
input is the index, on the network's own scale (`Schedule.time_scale`: DiT's timestep 0 .. 999).

Endpoints. The schedules cannot reach SNR 0 (t = 0) or infinity (t = 1) with finite estimates: eps
divides by alpha, x0 by sigma. So tau is clipped into TAU_RANGE, the range VP experts are trained
on here (training_example draws tau there too). Inside it the four steps are exact. Outside it (t
below about 0.007 for the default linear schedule, above about 0.99) the expert is run at the clipped
tau and x_s no longer has exactly its alpha and sigma, so the two estimates no longer add up to x_t;
we then keep the estimate that is well conditioned at that end and take the other from x_t itself:
for t < 1/2, x1^ and x0^ = (x_t - t x1^) / (1 - t), i.e. v = (x1^ - x_t) / (1 - t); for t >= 1/2,
x0^ and v = (x_t - x0^) / t. Inside the range both forms equal x1^ - x0^ (the estimates satisfy
x_t = t x1^ + (1 - t) x0^ there), so one formula serves every t, t = 0 and t = 1 included.

Low SNR. An eps (or v) expert's x1^ near the noise end is its prediction error divided by alpha:
alpha is 0.0067 at the linear schedule's tau_max and 0.0016 at the cosine's, so an eps error of 0.1
becomes an x1^ error of 15 to 60, and one Euler step from t = 0 carries dt times that into the
sample, which then leaves the data's range and never comes back (the emoji study's first eps expert
under the cosine schedule did: docs/RESULTS.md). Where the deployment's sample space bounds the data
(its value_range), x1^ is clipped into it before it is used, as DDPM's own sampler clips its x0
estimate (Ho et al. 2020, `clip_denoised`). A correct estimate lies in the range and is unchanged.

Classifier-free guidance commutes with all of this wherever the clip does not bind: for fixed x_t and t
the conversion is affine in p (v = A x_t + B p), and an affine map keeps affine combinations, so
converting v_null and v_y and then guiding, v_null + g (v_y - v_null), equals converting the guided
prediction. Expert.velocity converts per row (each branch's x1^ clipped) and guides after
(tests/workers/test_objectives.py checks the equality).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddm.schema.expert_card import DISCRETE_SCHEDULES, FLOW_VELOCITY, T0_DATA, Objective, Schedule

# The expert time range (diffusion time, tau = 0 data) that VP experts train on and are evaluated in.
TAU_RANGE = (1e-3, 1.0 - 1e-3)
DISCRETE_TAU_RANGE = (0.0, 1.0)  # a discrete schedule's: every step, index 0 .. steps - 1

# predict(x in the expert's space f32 [B, ...], its time input f32 [B]) -> raw prediction f32 [B, ...]
Predict = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _col(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Per-row values [B] shaped to broadcast against x [B, ...]."""
    return np.asarray(a).reshape((-1,) + (1,) * (like.ndim - 1))


def tau_range(schedule: Schedule) -> tuple[float, float]:
    """The diffusion times an expert of `schedule` is trained on and run at (see the module docstring)."""
    return DISCRETE_TAU_RANGE if schedule.name in DISCRETE_SCHEDULES else TAU_RANGE


@functools.cache
def discrete_log_alpha_bar(schedule: Schedule) -> np.ndarray:
    """log alpha_bar_i, i = 0 .. steps - 1, of a discrete-linear schedule (float64 [steps], decreasing):
    betas = linspace(beta_start, beta_end, steps), alpha_bar = cumprod(1 - betas), as DDPM and DiT build
    them (in float64)."""
    steps = int(schedule.param("steps"))
    betas = np.linspace(schedule.param("beta_start"), schedule.param("beta_end"), steps, dtype=np.float64)
    out = np.log(np.cumprod(1.0 - betas))
    out.setflags(write=False)
    return out


def log_alpha(schedule: Schedule, tau) -> np.ndarray:
    """log alpha_tau of a VP schedule (float64)."""
    tau = np.asarray(tau, dtype=np.float64)
    if schedule.name in DISCRETE_SCHEDULES:  # log-linear between whole steps, at index tau (steps - 1)
        table = discrete_log_alpha_bar(schedule)
        return 0.5 * np.interp(tau * (len(table) - 1), np.arange(len(table)), table)
    if schedule.name == "linear":
        b0, b1 = schedule.param("beta_min"), schedule.param("beta_max")
        return -0.5 * b0 * tau - 0.25 * (b1 - b0) * tau**2
    if schedule.name == "cosine":
        s = schedule.param("s")
        f = np.cos((tau + s) / (1 + s) * np.pi / 2) / np.cos(s / (1 + s) * np.pi / 2)
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(f, 0.0))
    raise ValueError(f"no alpha for schedule {schedule.name!r}")  # Schedule refuses unknown names


def alpha_sigma(schedule: Schedule, tau) -> tuple[np.ndarray, np.ndarray]:
    """(alpha_tau, sigma_tau), alpha^2 + sigma^2 = 1, float64 [B]."""
    la = log_alpha(schedule, tau)
    alpha = np.exp(la)
    # sigma = sqrt(1 - alpha^2) = sqrt(-expm1(2 log alpha)): accurate where alpha is near 1
    return alpha, np.sqrt(-np.expm1(2.0 * la))


def tau_of_log_alpha(schedule: Schedule, la) -> np.ndarray:
    """The inverse of log_alpha (float64; la <= 0, -inf allowed: then tau beyond the schedule)."""
    la = np.minimum(np.asarray(la, dtype=np.float64), 0.0)
    if schedule.name in DISCRETE_SCHEDULES:  # the interpolation read backwards; beyond the ends: the ends
        table = discrete_log_alpha_bar(schedule)
        index = np.interp(-2.0 * la, -table, np.arange(len(table)))
        return index / (len(table) - 1)
    if schedule.name == "linear":
        b0, b1 = schedule.param("beta_min"), schedule.param("beta_max")
        a, b, c = 0.25 * (b1 - b0), 0.5 * b0, -la  # a tau^2 + b tau = c >= 0
        with np.errstate(invalid="ignore", over="ignore"):
            # the stable root 2c / (b + sqrt(b^2 + 4ac)) (no cancellation near tau = 0)
            tau = 2 * c / (b + np.sqrt(b * b + 4 * a * c))
        return np.where(np.isinf(c), np.inf, tau)
    if schedule.name == "cosine":
        s = schedule.param("s")
        f = np.exp(la) * np.cos(s / (1 + s) * np.pi / 2)
        return (1 + s) * np.arccos(np.clip(f, -1.0, 1.0)) * 2 / np.pi - s
    raise ValueError(f"no inverse for schedule {schedule.name!r}")


def matched_tau(schedule: Schedule, t) -> tuple[np.ndarray, np.ndarray]:
    """(tau, r): the expert's diffusion time whose SNR matches the deployment's t, clipped into
    its tau_range (TAU_RANGE for a continuous schedule), and the scale r = sqrt(t^2 + (1 - t)^2) with
    x_s = x_t / r. float64 [B]."""
    t = np.asarray(t, dtype=np.float64)
    r = np.sqrt(t * t + (1 - t) ** 2)
    with np.errstate(divide="ignore"):
        la = np.log(t / r)  # log a; -inf at t = 0
    tau = tau_of_log_alpha(schedule, la)
    return np.clip(tau, *tau_range(schedule)), r


def time_input(objective: Objective, tau) -> np.ndarray:
    """The network's time input for diffusion time tau: tau (t0-data) or 1 - tau (t0-noise); for a
    discrete schedule, on its step-index scale (times steps - 1: DiT's 0 .. 999)."""
    tau = np.asarray(tau, dtype=np.float64)
    out = tau if objective.time_convention == T0_DATA else 1.0 - tau
    schedule = objective.schedule
    if schedule is not None and schedule.name in DISCRETE_SCHEDULES:
        out = out * schedule.time_scale
    return out


def estimates(name: str, p, x_s, alpha, sigma) -> tuple[np.ndarray, np.ndarray]:
    """(x1^, x0^): the data and noise estimates of prediction p of objective `name` at x_s, alpha,
    sigma (alpha, sigma broadcast against x_s)."""
    if name == "ddpm-eps":
        return (x_s - sigma * p) / alpha, p
    if name == "ddpm-x0":
        return p, (x_s - alpha * p) / sigma
    if name == "ddpm-v":
        return alpha * x_s - sigma * p, sigma * x_s + alpha * p
    raise ValueError(f"no estimates for objective {name!r}")


def velocity_from_estimates(x1_hat, x0_hat, x_t, t) -> np.ndarray:
    """x1^ - x0^, written so that it stays finite at t = 0 and t = 1 (see the module docstring)."""
    t = _col(np.asarray(t, dtype=np.float64), x_t)
    low = (x1_hat - x_t) / np.maximum(1.0 - t, 0.5)  # t < 1/2: trust x1^
    high = (x_t - x0_hat) / np.maximum(t, 0.5)  # t >= 1/2: trust x0^
    return np.where(t < 0.5, low, high)


@dataclass(frozen=True)
class Conversion:
    """An objective's way to the deployment's velocity (see the module docstring)."""

    objective: Objective
    value_range: tuple[float, float] | None = None  # the data's bounds: x1^ is clipped into them

    def velocity(self, predict: Predict, x_t: np.ndarray, t: np.ndarray) -> np.ndarray:
        """v(x_t, t) in the deployment's convention. x_t f32 [B, ...], t f32 [B] in [0, 1] ->
        f32 [B, ...]; `predict` is called once, on all B rows."""
        obj = self.objective
        if obj.name == FLOW_VELOCITY:  # t0-data (t0-noise never gets here: conversion_for is None)
            s = (1.0 - np.asarray(t, dtype=np.float32)).astype(np.float32)
            return (-predict(x_t, s)).astype(np.float32)
        tau, r = matched_tau(obj.schedule, t)
        x_s = (x_t / _col(r, x_t)).astype(np.float32)
        p = predict(x_s, time_input(obj, tau).astype(np.float32)).astype(np.float64)
        alpha, sigma = (_col(a, x_t) for a in alpha_sigma(obj.schedule, tau))
        x1_hat, x0_hat = estimates(obj.name, p, x_s.astype(np.float64), alpha, sigma)
        if self.value_range is not None:  # see "Low SNR" in the module docstring
            x1_hat = np.clip(x1_hat, *self.value_range)
        return velocity_from_estimates(x1_hat, x0_hat, x_t.astype(np.float64), t).astype(np.float32)


def conversion_for(objective: Objective, value_range: tuple[float, float] | None = None) -> Conversion | None:
    """None for the identity (flow-velocity, t0-noise): the caller runs the network as it always did.
    value_range: the sample space's, which bounds a DDPM expert's data estimate (None: unbounded)."""
    return None if objective.is_identity else Conversion(objective, value_range)


def training_example(objective: Objective, x1: np.ndarray, noise: np.ndarray, u: np.ndarray):
    """One regression example of `objective`: x1 data f32 [B, ...], noise f32 [B, ...] (N(0, I)),
    u f32 [B] uniform in [0, 1) -> (network input x f32, its time input f32 [B], target f32).

    flow-velocity: s = u along the expert's own time (t0-noise: x = s x1 + (1 - s) x0, target
    x1 - x0; t0-data: x = (1 - s) x1 + s x0, target x0 - x1). ddpm-*: tau = u spread over tau_range,
    x = alpha x1 + sigma eps, target eps, x1 (DDPM's x0) or alpha eps - sigma x1.
    """
    u64 = np.asarray(u, dtype=np.float64)
    if objective.name == FLOW_VELOCITY:
        s = _col(u64, x1)
        if objective.time_convention == T0_DATA:
            x, target = (1 - s) * x1 + s * noise, noise - x1
        else:
            x, target = s * x1 + (1 - s) * noise, x1 - noise
        return x.astype(np.float32), u64.astype(np.float32), target.astype(np.float32)
    lo, hi = tau_range(objective.schedule)
    tau = lo + u64 * (hi - lo)
    alpha, sigma = (_col(a, x1) for a in alpha_sigma(objective.schedule, tau))
    x = alpha * x1 + sigma * noise
    if objective.name == "ddpm-eps":
        target = noise
    elif objective.name == "ddpm-x0":
        target = x1
    elif objective.name == "ddpm-v":
        target = alpha * noise - sigma * x1
    else:
        raise ValueError(f"no training target for objective {objective.name!r}")
    return x.astype(np.float32), time_input(objective, tau).astype(np.float32), np.asarray(target, np.float32)
