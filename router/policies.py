"""Routing: which experts serve each sample at each step, with what weights.

A router estimates p(cluster | x_t, t, y) as probabilities [B, K]; a strategy turns them into
mixture weights: top-k keeps the k largest and renormalises (top1 = k=1), full keeps them all.
The "oracle" strategy uses the label -> expert table of a label partition instead of a router.

Routers here:
  LabelTableRouter  p(k | y) from a table [11, K] (row 10 = the null class). Two tables:
    oracle_table       one-hot, for partitions by label set (the seed's 0-4 / 5-9 split); its
                       null row (the largest cluster) serves the router strategies where the
                       router kind is 'oracle'; the 'oracle' strategy refuses a null label;
    label_prior_table  p(k | y) proportional to each cluster's label counts (any partition;
                       ignores x_t, the baseline a learned router must beat).
Learned routers (a network on x_t, t, y) plug in through the same `probs` method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ddm.schema.descriptor import oracle_null_error
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.strategy import Strategy, accepted_strategies


class Router(Protocol):
    num_experts: int

    def probs(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x f32 [B,C,H,W] (the sample space), t f32 [B], y i64 [B] -> p(cluster) f32 [B, K], rows sum
        to 1."""


@dataclass(frozen=True)
class LabelTableRouter:
    table: np.ndarray  # float32 [num_classes + 1, K]: the last row is the null class's

    @property
    def num_experts(self) -> int:
        return int(self.table.shape[1])

    @property
    def null_class(self) -> int:
        return int(self.table.shape[0]) - 1

    def probs(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(y, dtype=np.int64)]


def oracle_table(label_counts: np.ndarray) -> np.ndarray | None:
    """label_counts int [E, C] (C classes: 10 for the legacy space) -> one-hot [C + 1, E], or None if
    some label is in two clusters or none (or the space is unconditional: no label names an expert)."""
    present = np.asarray(label_counts) > 0
    classes = present.shape[1]
    if classes == 0 or not np.all(present.sum(axis=0) == 1):
        return None
    table = np.zeros((classes + 1, present.shape[0]), np.float32)
    table[np.arange(classes), present.argmax(axis=0)] = 1.0
    table[classes, np.asarray(label_counts).sum(axis=1).argmax()] = 1.0  # null: the largest cluster
    return table


def label_prior_table(label_counts: np.ndarray) -> np.ndarray:
    """label_counts int [E, C] -> p(k | y) [C + 1, E]; the null row is p(k) (cluster sizes; uniform
    where no counts are known: an unconditional space)."""
    counts = np.asarray(label_counts, dtype=np.float64)  # [E, C]
    if counts.ndim != 2 or np.any(counts.sum(axis=0) == 0):
        raise ConfigError(expected("label counts [E, C] with every label in some cluster", counts.shape))
    sizes = counts.sum(axis=1)
    if sizes.sum() == 0:
        sizes = np.ones_like(sizes)
    table = np.concatenate([counts.T, sizes[None, :]], axis=0)  # [C + 1, E]
    return (table / table.sum(axis=1, keepdims=True)).astype(np.float32)


def strategy_weights(probs: np.ndarray, strategy: Strategy) -> np.ndarray:
    """probs [B, K] -> weights [B, K] for a topk or full strategy."""
    kind, k = strategy.kind, strategy.k
    probs = np.asarray(probs, dtype=np.float32)
    if kind == "full":
        return probs / probs.sum(axis=1, keepdims=True)
    if kind != "topk":
        raise SchemaError(expected("a router strategy topk:K, top1 or full", strategy))
    K = probs.shape[1]
    if k >= K:
        return probs / probs.sum(axis=1, keepdims=True)
    order = np.argsort(-probs, axis=1, kind="stable")[:, :k]  # ties: the lower expert id wins
    weights = np.zeros_like(probs)
    rows = np.arange(len(probs))[:, None]
    weights[rows, order] = probs[rows, order]
    total = weights.sum(axis=1, keepdims=True)
    # a row whose top-k all have probability 0 would divide by 0: give it the argmax alone
    zero = total[:, 0] <= 0
    weights[zero, order[zero, 0]] = 1.0
    total[zero] = 1.0
    return weights / total


@dataclass(frozen=True)
class RoutingPolicy:
    """The deployment's router plus, for label partitions, the oracle table."""

    router: Router
    oracle: LabelTableRouter | None = None

    @property
    def num_experts(self) -> int:
        return self.router.num_experts

    @property
    def reads_prompts(self) -> bool:
        """True when the router reads each row's pooled prompt embedding as y (a prompt-aware learned
        router, router/router_net.py text_width), not its label."""
        return bool(getattr(getattr(self.router, "cfg", None), "text_width", 0))

    def strategies(self) -> tuple[str, ...]:
        """Every strategy this policy routes (schema.strategy.accepted_strategies: the one rule)."""
        return accepted_strategies(self.num_experts, has_oracle=self.oracle is not None)

    def check_strategy(self, strategy: Strategy) -> None:
        """Raise SchemaError unless this policy can route `strategy`."""
        kind, k = strategy.kind, strategy.k
        if kind == "oracle" and self.oracle is None:
            raise SchemaError(
                "strategy 'oracle' needs experts with disjoint label sets; expected one of top1, topk:K, full"
            )
        if kind == "topk" and k > self.num_experts:
            raise SchemaError(
                expected(f"topk:K with K <= {self.num_experts} (the experts deployed)", str(strategy))
            )

    def weights(self, x: np.ndarray, t: np.ndarray, y: np.ndarray, strategy: Strategy) -> np.ndarray:
        """Mixture weights float32 [B, K] for one step."""
        if strategy.kind == "oracle":
            if self.oracle is None:
                raise SchemaError(
                    "strategy 'oracle' needs a partition by label sets (each label in exactly one expert); "
                    "this deployment's experts share labels - use top1, topk:K or full"
                )
            null_class = self.oracle.null_class
            nulls = int(np.count_nonzero(np.asarray(y) == null_class))
            if nulls:  # the null row of the oracle's table is a placeholder, not a routing
                raise SchemaError(oracle_null_error(str(strategy), nulls, null_class=null_class))
            return self.oracle.probs(x, t, y)
        return strategy_weights(self.route_probs(x, t, y), strategy)

    def route_probs(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The router's p(expert) [B, K]; SchemaError when y is not what it reads (labels [B], or a
        prompt-aware router's embeddings [B, width])."""
        if self.reads_prompts != (np.ndim(y) == 2):
            want = "each row's prompt embedding [B, width]" if self.reads_prompts else "labels [B]"
            raise SchemaError(expected(f"the router's input {want}", f"shape {list(np.shape(y))}"))
        return np.asarray(self.router.probs(x, t, y), dtype=np.float32)


def without_gone(
    policy: RoutingPolicy,
    x: np.ndarray,
    t: np.ndarray,
    y: np.ndarray,
    strategy: Strategy,
    gone: frozenset[int],
) -> tuple[np.ndarray, np.ndarray]:
    """(weights, rerouted) [B, K] for one step: the routing, and the same with the experts in `gone` (no
    live worker) left out where the strategy allows it: a mixing strategy routes over the live
    experts. A row only gone experts could serve, and every row of oracle and top1, keeps its routing in
    `rerouted` too (it has to wait for the expert; the scheduler bounds the wait)."""
    if not gone or not strategy.mixes:
        w = policy.weights(x, t, y, strategy)
        return w, w
    probs = policy.route_probs(x, t, y)
    weights = strategy_weights(probs, strategy)
    live = np.ones(probs.shape[1], bool)
    live[sorted(gone)] = False
    masked = probs * live
    servable = masked.sum(axis=1) > 0
    rerouted = weights.copy()
    if servable.any():
        rerouted[servable] = strategy_weights(masked[servable], strategy)
    return weights, rerouted


def build_policy(kind: str, label_counts: np.ndarray, learned: Router | None = None) -> RoutingPolicy:
    """Routing policy for a deployment: router kind oracle | label-prior | learned."""
    table = oracle_table(label_counts)
    oracle = LabelTableRouter(table) if table is not None else None
    if kind == "oracle":
        if oracle is None:
            raise ConfigError(
                "router kind 'oracle' needs experts with disjoint label sets; use label-prior or learned"
            )
        return RoutingPolicy(router=oracle, oracle=oracle)
    if kind == "label-prior":
        return RoutingPolicy(router=LabelTableRouter(label_prior_table(label_counts)), oracle=oracle)
    if kind == "learned":
        if learned is None:
            raise ConfigError("router kind 'learned' needs a router checkpoint")
        return RoutingPolicy(router=learned, oracle=oracle)
    raise ConfigError(expected("router kind oracle, label-prior or learned", kind))
