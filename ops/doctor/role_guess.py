"""The role `ddm doctor` checks when --role is not given: what this machine can do. Assuming `all` (serve
a deployment here) failed where everything worked: outside the repository (no deployment file to serve)
and on a client-only install (no serving extra). The guess is said in the output, with how to choose."""

from __future__ import annotations

from pathlib import Path

from ddm.ops.extras import missing_modules
from ddm.schema.errors import ConfigError
from ddm.workers.frameworks import FRAMEWORKS

SERVING_EXTRAS = (*sorted({f.extra for f in FRAMEWORKS.values()}), "ui")  # what serving needs beyond base


def guess_role(deployment: Path | None, environ=None) -> tuple[str, str]:
    """(role, why) from what is here: 'all' where a deployment file resolves (--deployment,
    $DDM_DEPLOYMENT, the shipped one under the working folder) and some serving extra is installed,
    else 'client' (submit and follow jobs: no deployment file, no extra)."""
    from ddm.schema.deployment import resolve_deployment

    try:
        path = resolve_deployment(deployment, environ)
    except ConfigError:
        path = None
    installed = [extra for extra in SERVING_EXTRAS if not missing_modules(extra)]
    if path is None:
        why = "no deployment file to serve here (no --deployment, DDM_DEPLOYMENT unset, no shipped one)"
    elif not installed:
        why = f"no serving extra installed ({', '.join(SERVING_EXTRAS)}): a client-only install"
    else:
        return "all", f"guessed: deployment {path}, extras {', '.join(installed)} installed"
    return "client", f"guessed: {why}; --role all|router|expert checks serving"
