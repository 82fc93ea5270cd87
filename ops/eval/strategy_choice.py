"""The strategy `ddm eval` samples with when --strategy is not given: the deployment's default, by the
rule the serving router publishes (its `strategy`, else the oracle where the labels name the expert,
else top1), so eval measures what `ddm submit` would run. Hard-coding the oracle failed on every
deployment without one (a k-means partition with a learned router)."""

from __future__ import annotations

from ddm.router.deployment_loader import expert_label_counts
from ddm.router.policies import oracle_table
from ddm.schema.deployment import Deployment
from ddm.schema.strategy import default_strategy


def eval_strategy(deployment: Deployment, requested: str | None) -> tuple[str, str]:
    """(strategy, why it was chosen, for the output). Reads each expert's meta.json only: no weights,
    no learned router, so the choice is printed before minutes of sampling."""
    if requested is not None:
        return requested, "--strategy"
    if deployment.strategy is not None:
        return deployment.strategy, f"the deployment's default (`strategy` in {deployment.path.name})"
    has_oracle = oracle_table(expert_label_counts(deployment)) is not None
    why = "each label in one expert" if has_oracle else "its experts share labels: no oracle"
    return default_strategy(has_oracle), f"the deployment's default ({why}); --strategy to choose"
