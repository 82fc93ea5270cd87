"""Before `ddm up` starts anything: is every install extra its children need importable here? A child
started without one died MAX_START_FAILURES times before its output named the missing module; this
says it at once, for every child, with the one pip command that fixes them all."""

from __future__ import annotations

from ddm.ops.extras import DISTRIBUTION, missing_modules
from ddm.workers.frameworks import JAX, expert_framework


def planned_extras(deployment, metas: dict, ui: bool) -> dict[str, list[str]]:
    """extra -> the children that need it: each expert's framework (from its meta.json), the learned
    router's JAX/Flax network (the label-table routers need nothing beyond the base install), the UI."""
    needs: dict[str, list[str]] = {}
    for entry in deployment.experts:
        framework = expert_framework(
            metas[entry.id].get("framework"), f"expert {entry.id}'s meta.json framework"
        )
        needs.setdefault(framework.extra, []).append(f"expert {entry.id} ({framework.name})")
    if deployment.router.kind == "learned":
        needs.setdefault(JAX.extra, []).append("the learned router")
    if ui:
        needs.setdefault("ui", []).append("the web UI (--no-ui to go without)")
    return needs


def missing_extras_message(deployment, metas: dict, ui: bool) -> str | None:
    """One message naming each missing extra, who needs it and the pip command; None when all are here."""
    missing = {}
    for extra, who in planned_extras(deployment, metas, ui).items():
        if modules := missing_modules(extra):
            missing[extra] = f"{', '.join(who)} need{'s' if len(who) == 1 else ''} the {extra} extra " + (
                f"(no module {', '.join(modules)})"
            )
    if not missing:
        return None
    return (
        f"nothing was started: {'; '.join(missing.values())}. "
        f"Install with: pip install '{DISTRIBUTION}[{','.join(sorted(missing))}]'"
    )
