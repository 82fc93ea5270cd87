"""Routing: tables, strategies, and the policy a deployment builds."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.router.policies import (
    LabelTableRouter,
    RoutingPolicy,
    build_policy,
    label_prior_table,
    oracle_table,
    strategy_weights,
)
from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.strategy import Strategy

SPLIT = np.array([[5] * 5 + [0] * 5, [0] * 5 + [7] * 5])  # label counts [K=2, 10]: 0-4 | 5-9
OVERLAP = np.array([[4] * 7 + [0] * 3, [0] * 3 + [4] * 7])  # 0-6 | 3-9


def test_oracle_table_is_one_hot_by_label_set():
    table = oracle_table(SPLIT)
    assert table.shape == (11, 2)
    assert (table[:5, 0] == 1).all() and (table[5:10, 1] == 1).all()
    assert table.sum(axis=1).tolist() == [1.0] * 11
    assert oracle_table(OVERLAP) is None  # labels 3-6 are in both clusters


def test_label_prior_is_conditional_frequency():
    table = label_prior_table(OVERLAP)
    np.testing.assert_allclose(table[0], [1, 0])
    np.testing.assert_allclose(table[4], [0.5, 0.5])
    np.testing.assert_allclose(table[10], [0.5, 0.5])  # null row: cluster sizes
    with pytest.raises(ConfigError):
        label_prior_table(np.zeros((2, 10)))


def test_topk_keeps_the_largest_and_renormalises():
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]], np.float32)
    np.testing.assert_allclose(strategy_weights(p, Strategy.parse("top1")), [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(
        strategy_weights(p, Strategy.parse("topk:2")),
        [[0.625, 0.375, 0], [0.1 / 0.9, 0, 0.8 / 0.9]],
        rtol=1e-5,
    )
    np.testing.assert_allclose(strategy_weights(p, Strategy.parse("full")), p, rtol=1e-6)
    # k >= K: the full ensemble
    np.testing.assert_allclose(strategy_weights(p, Strategy.parse("topk:5")), p, rtol=1e-6)


def test_ties_go_to_the_lower_expert_id_and_zero_rows_get_the_argmax():
    p = np.array([[0.5, 0.5], [0.0, 0.0]], np.float32)
    np.testing.assert_allclose(strategy_weights(p, Strategy.parse("top1")), [[1, 0], [1, 0]])


def test_policy_strategies_and_checks():
    policy = build_policy("oracle", SPLIT)
    assert policy.strategies() == ("oracle", "top1", "topk:2", "full")
    x, t, y = np.zeros((3, 1, 32, 32), np.float32), np.zeros(3, np.float32), np.array([1, 6, 9])
    np.testing.assert_allclose(policy.weights(x, t, y, Strategy.parse("oracle")), [[1, 0], [0, 1], [0, 1]])
    with pytest.raises(SchemaError, match="topk:K with K <= 2"):
        policy.check_strategy(Strategy.parse("topk:3"))
    prior = build_policy("label-prior", OVERLAP)
    assert prior.oracle is None
    with pytest.raises(SchemaError, match="disjoint label sets"):
        prior.check_strategy(Strategy.parse("oracle"))
    np.testing.assert_allclose(
        prior.weights(x, t, np.array([0, 4, 9]), Strategy.parse("full")), [[1, 0], [0.5, 0.5], [0, 1]]
    )
    with pytest.raises(ConfigError):
        build_policy("oracle", OVERLAP)
    with pytest.raises(ConfigError):
        build_policy("learned", SPLIT)


def test_a_learned_router_plugs_in_through_probs():
    class Half:
        num_experts = 2

        def probs(self, x, t, y):
            return np.tile(np.array([[0.2, 0.8]], np.float32), (len(x), 1))

    policy = RoutingPolicy(router=Half(), oracle=LabelTableRouter(oracle_table(SPLIT)))
    x, t, y = np.zeros((2, 1, 32, 32), np.float32), np.zeros(2, np.float32), np.array([0, 9])
    np.testing.assert_allclose(policy.weights(x, t, y, Strategy.parse("top1")), [[0, 1], [0, 1]])
    np.testing.assert_allclose(policy.weights(x, t, y, Strategy.parse("oracle")), [[1, 0], [0, 1]])
