"""Turn a Deployment (schema/deployment.py) into live objects: experts, a routing policy, and the
descriptor the router publishes (what a job on this deployment means)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ddm.router.policies import RoutingPolicy, build_policy
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor, ExpertInfo
from ddm.schema.errors import ConfigError, expected
from ddm.schema.expert_card import ExpertCard, card_of
from ddm.schema.strategy import default_strategy
from ddm.workers.checkpoint import read_meta


def space_difference(a: ExpertCard, b: ExpertCard) -> str:
    """What differs between two experts' sample spaces and conditioning ('' when nothing). A card derived
    for an old checkpoint (no card in its meta) declares no class names of its own: names are then not
    compared, only shape, value range and the number of classes."""
    space_a, space_b = a.sample_space, b.sample_space
    if (a.derived or b.derived) and space_a.num_classes == space_b.num_classes:
        space_b = dataclasses.replace(space_b, class_names=space_a.class_names)
    return space_a.describe_difference(space_b)


def expert_cards(deployment: Deployment) -> dict[int, ExpertCard]:
    """Each expert's card (schema/expert_card.py), read from its meta.json (weights untouched), checked
    to agree: one sample space and one conditioning for the whole deployment, as many classes as the
    deployment names. ConfigError naming both experts and the difference otherwise."""
    entries = {e.id: e for e in deployment.experts}
    cards = {k: card_of(read_meta(e.checkpoint), f"{e.checkpoint}/meta.json") for k, e in entries.items()}
    if not cards:
        return cards
    first = next(iter(cards))
    for k, card in cards.items():
        if difference := space_difference(cards[first], card):
            raise ConfigError(
                f"{deployment.path}: experts {first} ({entries[first].checkpoint}) and {k} "
                f"({entries[k].checkpoint}) declare different sample spaces: {difference} "
                "(a deployment serves one sample space)"
            )
    space = cards[first].sample_space
    if space.num_classes != len(deployment.class_names):
        want = f"experts conditioned on the deployment's {len(deployment.class_names)} classes"
        raise ConfigError(f"{deployment.path}: {expected(want, space.describe())}")
    return cards


def expert_label_counts(deployment: Deployment) -> np.ndarray:
    """int64 [K, 10]: each expert's training label counts, read from its meta.json (weights untouched).
    Refuses experts whose sample spaces or conditioning differ (expert_cards)."""
    expert_cards(deployment)
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

    expert_cards(deployment)  # one sample space, before any weights are loaded
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
        sampling=deployment.sampling,
    )
