"""A deployment descriptor built by hand, for the tests of what it says a job means."""

from __future__ import annotations

import dataclasses

from ddm.schema.descriptor import DIGITS, DeploymentDescriptor, ExpertInfo
from ddm.schema.strategy import accepted_strategies


def demo_descriptor(
    router_kind: str = "oracle", second_labels=(5, 6, 7, 8), **changes
) -> DeploymentDescriptor:
    """Two experts: 0 (torch, digits 0-4) and 1 (jax, `second_labels`), the oracle by default,
    guidance 1.5; `changes` replace any field."""
    base = DeploymentDescriptor(
        name="demo",
        router_kind=router_kind,
        experts=(
            ExpertInfo(0, "torch", "cpu", (0, 1, 2, 3, 4), "labels"),
            ExpertInfo(1, "jax", "auto", tuple(second_labels), "labels"),
        ),
        strategies=accepted_strategies(2, has_oracle=True),
        default_strategy="oracle",
        default_guidance=1.5,
        class_names=DIGITS,
        router_id="router-a",
        published_at=1.0,
    )
    if "class_names" in changes and "sample_space" not in changes:  # the legacy space, renamed
        changes["sample_space"] = None
    return dataclasses.replace(base, **changes)
