"""The sampler's pieces and the local driver, on velocity fields whose answer is known."""

from __future__ import annotations

import numpy as np

from ddm.router.policies import build_policy
from ddm.router.sampler import combine, initial_noise, plan_step, sample_local
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.strategy import Strategy

SPLIT = np.array([[5] * 5 + [0] * 5, [0] * 5 + [7] * 5])
OVERLAP = np.array([[4] * 7 + [0] * 3, [0] * 3 + [4] * 7])


def constant(value: float):
    def velocity(x, t, y, g):
        return np.full_like(x, value)

    return velocity


def test_initial_noise_depends_only_on_seed_and_n():
    a = JobSpec.new([1, 2], seed=5)
    b = JobSpec.new([7, 9], steps=10, strategy="full", seed=5)
    np.testing.assert_array_equal(initial_noise(a), initial_noise(b))
    assert not np.array_equal(initial_noise(a), initial_noise(JobSpec.new([1, 2], seed=6)))


def test_plan_routes_rows_and_combine_mixes_them():
    policy = build_policy("label-prior", OVERLAP)
    x = np.zeros((3, 1, 32, 32), np.float32)
    plan = plan_step(policy, Strategy.parse("full"), x, 0.3, np.array([0, 4, 9]))
    assert {k: r.tolist() for k, r in plan.rows.items()} == {0: [0, 1], 1: [1, 2]}
    v = combine(
        plan, {0: np.full((2, 1, 32, 32), 2.0, np.float32), 1: np.full((2, 1, 32, 32), 4.0, np.float32)}, 3
    )
    assert v[0].max() == 2.0 and v[1].max() == 3.0 and v[2].max() == 4.0  # 0.5 * 2 + 0.5 * 4 = 3


def test_oracle_sampling_integrates_each_expert_exactly():
    # expert 0 moves every pixel at +1 per unit time, expert 1 at -2: after t = 0 -> 1, x1 = x0 + v.
    spec = JobSpec.new([0, 7, 3], steps=10, strategy="oracle", guidance=1.0, seed=1)
    x = sample_local(
        {0: constant(1.0), 1: constant(-2.0)}, build_policy("oracle", SPLIT), ResolvedJob.of(spec)
    )
    x0 = initial_noise(spec)
    np.testing.assert_allclose(x[0], x0[0] + 1.0, atol=1e-5)
    np.testing.assert_allclose(x[1], x0[1] - 2.0, atol=1e-5)
    np.testing.assert_allclose(x[2], x0[2] + 1.0, atol=1e-5)


def test_full_ensemble_mixes_by_label_prior_and_reports_each_step():
    spec = JobSpec.new([4], steps=4, strategy="full", guidance=1.0, seed=2)
    seen = []
    x = sample_local(
        {0: constant(1.0), 1: constant(3.0)},
        build_policy("label-prior", OVERLAP),
        ResolvedJob.of(spec),
        on_step=lambda step, t, x, plan: seen.append((step, t, plan.experts)),
    )
    np.testing.assert_allclose(x, initial_noise(spec) + 2.0, atol=1e-5)  # 0.5 * 1 + 0.5 * 3
    assert seen == [(1, 0.25, (0, 1)), (2, 0.5, (0, 1)), (3, 0.75, (0, 1)), (4, 1.0, (0, 1))]


def test_sampling_is_a_function_of_the_spec():
    policy = build_policy("label-prior", OVERLAP)

    def field(x, t, y, g):
        return -x * (1 + y[:, None, None, None]) * t[:, None, None, None]

    spec = JobSpec.new([0, 5, 9], steps=7, strategy="topk:2", guidance=1.0, seed=3)
    a = sample_local({0: field, 1: field}, policy, ResolvedJob.of(spec))
    b = sample_local({0: field, 1: field}, policy, ResolvedJob.of(spec))
    np.testing.assert_array_equal(a, b)
