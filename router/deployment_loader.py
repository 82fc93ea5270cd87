"""Turn a Deployment (schema/deployment.py) into live objects: experts, a routing policy, and the
descriptor the router publishes (what a job on this deployment means)."""

from __future__ import annotations

import time

import numpy as np

from ddm.router.policies import RoutingPolicy, build_policy
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor, ExpertInfo
from ddm.schema.errors import ConfigError
from ddm.schema.strategy import default_strategy
from ddm.workers.checkpoint import read_meta


def expert_label_counts(deployment: Deployment) -> np.ndarray:
    """int64 [K, 10]: each expert's training label counts, read from its meta.json (weights untouched)."""
    rows = []
    for entry in deployment.experts:
        meta = read_meta(entry.checkpoint)
        counts = meta.get("label_counts")
        if not isinstance(counts, list) or len(counts) != 10:
            raise ConfigError(f"{entry.checkpoint}/meta.json: expected label_counts, a list of 10 ints")
        rows.append(counts)
    return np.asarray(rows, dtype=np.int64)


def load_policy(deployment: Deployment) -> RoutingPolicy:
    learned = None
    if deployment.router.kind == "learned":
        from ddm.router.learned import load_router  # a later issue: the learned router network

        learned = load_router(deployment.router.checkpoint)
    return build_policy(deployment.router.kind, expert_label_counts(deployment), learned)


def load_experts(deployment: Deployment, device: str | None = None) -> dict:
    """All experts of a deployment, in-process, each at its entry's precision (device overrides each
    entry's device if given; a precision that device lacks is refused, not changed)."""
    from ddm.workers import load_expert

    return {
        e.id: load_expert(e.checkpoint, device=device or e.device, precision=e.precision)
        for e in deployment.experts
    }


def describe(deployment: Deployment, policy: RoutingPolicy, router_id: str) -> DeploymentDescriptor:
    """The descriptor of `deployment` as served by `policy` (reads each expert's meta.json only).
    The router publishes it; `ddm sample --local` resolves its jobs with it too, so both agree."""
    experts = []
    for entry, counts in zip(deployment.experts, expert_label_counts(deployment), strict=True):
        meta = read_meta(entry.checkpoint)
        partition = meta.get("partition")
        cluster = partition.get("method", "?") if isinstance(partition, dict) else "?"
        labels = tuple(int(y) for y in np.flatnonzero(counts > 0))
        label_counts = tuple(int(c) for c in counts)
        info = ExpertInfo(entry.id, meta["framework"], entry.device, labels, str(cluster), label_counts)
        experts.append(info)
    has_oracle = policy.oracle is not None
    return DeploymentDescriptor(
        name=deployment.name,
        router_kind=deployment.router.kind,
        experts=tuple(experts),
        strategies=policy.strategies(),
        default_strategy=deployment.strategy or default_strategy(has_oracle),
        default_guidance=deployment.guidance,
        default_on_expert_loss=deployment.on_expert_loss,
        class_names=deployment.class_names,
        router_id=router_id,
        published_at=round(time.time(), 3),
    )
