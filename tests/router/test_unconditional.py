"""Unconditional images (the null label, NULL_CLASS) on the router side: the routing refuses them under
'oracle' and routes them under the router's strategies, the sampler's arrays give them guidance 1 (a
null row's guided velocity is v_null), and the router's intake fails an oracle job with a null label
with the message the client gives, while a job that named no strategy runs under top1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.router.intake import Delivery, Fail, Run
from ddm.router.policies import LabelTableRouter, RoutingPolicy, build_policy, oracle_table
from ddm.router.sampler import JobArrays, sample_local
from ddm.router.worker import RouterWorker
from ddm.schema.errors import SchemaError
from ddm.schema.flow import NULL_CLASS
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.resolved import ResolvedJob
from ddm.schema.strategy import Strategy

SPLIT = np.array([[5, 5, 5, 5, 5, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 9, 9, 9, 9, 9]])  # label counts [K, 10]


def test_the_oracle_strategy_refuses_a_null_label_and_names_it():
    policy = build_policy("label-prior", SPLIT)
    x, t = np.zeros((3, 1, 32, 32), np.float32), np.zeros(3, np.float32)
    y = np.array([2, NULL_CLASS, 7])
    with pytest.raises(SchemaError, match=r"strategy 'oracle' routes each image by its label, and 1 image"):
        policy.weights(x, t, y, Strategy.parse("oracle"))
    with pytest.raises(SchemaError, match=r"null label 10 \(unconditional\)"):
        policy.weights(x, t, y, Strategy.parse("oracle"))
    # the router strategies route the null row (here the label prior's null row: the cluster sizes)
    full = policy.weights(x, t, y, Strategy.parse("full"))
    np.testing.assert_allclose(full[1], [25 / 70, 45 / 70], rtol=1e-6)
    np.testing.assert_allclose(policy.weights(x, t, y, Strategy.parse("top1"))[1], [0.0, 1.0])
    np.testing.assert_allclose(full[[0, 2]], [[1.0, 0.0], [0.0, 1.0]])  # labelled rows as before


def test_a_router_that_reads_x_t_routes_null_rows_by_x_t():
    class ByBrightness:  # a stand-in for the learned router: p(expert 1) is the mean of x mapped to [0, 1]
        num_experts = 2

        def probs(self, x, t, y):
            p1 = np.clip((x.reshape(len(x), -1).mean(axis=1) + 1) / 2, 0, 1)
            return np.stack([1 - p1, p1], axis=1).astype(np.float32)

    policy = RoutingPolicy(router=ByBrightness(), oracle=LabelTableRouter(oracle_table(SPLIT)))
    x = np.stack([np.full((1, 32, 32), v, np.float32) for v in (-0.8, 0.0, 0.8)])
    w = policy.weights(x, np.zeros(3, np.float32), np.full(3, NULL_CLASS), Strategy.parse("full"))
    np.testing.assert_allclose(w[:, 1], [0.1, 0.5, 0.9], rtol=1e-5)


def test_null_rows_get_guidance_1_and_the_local_sampler_refuses_oracle():
    spec = JobSpec("j", (3, NULL_CLASS, 8), steps=2, strategy="full", guidance=2.5)
    arrays = JobArrays.of(ResolvedJob.of(spec))
    np.testing.assert_array_equal(arrays.guidance, np.array([2.5, 1.0, 2.5], np.float32))
    np.testing.assert_array_equal(arrays.labels, [3, NULL_CLASS, 8])

    policy = build_policy("oracle", SPLIT)
    seen = []

    def expert(x, t, y, g):
        seen.append((y.tolist(), g.tolist()))
        return np.zeros_like(x)

    # the oracle kind's table routes null by top1/full
    sample_local({0: expert, 1: expert}, policy, ResolvedJob.of(spec))
    assert all(g == [1.0] for y, g in seen if y == [NULL_CLASS]) and seen
    oracle = JobSpec("j", (3, NULL_CLASS), steps=2, strategy="oracle", guidance=1.0)
    with pytest.raises(SchemaError, match="strategy 'oracle' routes each image by its label"):
        sample_local({0: expert, 1: expert}, policy, ResolvedJob.of(oracle))


SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "mnist" / "deployment.toml"


def test_the_router_fails_unconditional_jobs_a_label_table_cannot_route(settings, label_split_deployment):
    """Under the oracle strategy a null label names no expert; under any strategy a label-table router's
    null row is a fixed expert, whatever x_t shows: both are refused, naming why."""
    router = RouterWorker(settings, label_split_deployment)  # intake and store only: nothing consumes
    spec = JobSpec.new([None, 4], steps=3, strategy="oracle")
    decision = router.intake.decide(Delivery(1, spec, None, spec.encode()))
    assert isinstance(decision, Fail)
    assert "strategy 'oracle' routes each image by its label" in decision.error
    assert "null label 10 (unconditional)" in decision.error
    spec = JobSpec.new([None], steps=3, strategy="full")
    decision = router.intake.decide(Delivery(2, spec, None, spec.encode()))
    assert isinstance(decision, Fail) and "need a router that reads x_t" in decision.error
    k = JobSpec.new([NULL_CLASS], steps=3, strategy="full")  # K as a number: a class past the last
    decision = router.intake.decide(Delivery(3, k, None, k.encode()))
    assert isinstance(decision, Fail) and "labels in 0..9, or null (an unconditional image)" in decision.error


def test_an_unconditional_job_without_a_strategy_runs_top1_on_a_learned_router(settings):
    router = RouterWorker(settings, SHIPPED)  # the shipped demo: learned router, oracle by default
    unset = JobSpec.new([None] * 2, steps=3)
    assert router.descriptor.default_strategy == "oracle"
    decision = router.intake.decide(Delivery(2, unset, None, unset.encode()))
    assert isinstance(decision, Run), decision
    assert decision.job.arrays.spec.strategy == "top1"
    st = router.store.job(unset.job_id)
    assert st.status is JobStatus.RUNNING and st.strategy == "top1"
    np.testing.assert_array_equal(decision.job.arrays.guidance, [1.0, 1.0])
