"""Doctor check of the installed packages: the base install's, and each extra's (ddm.ops.extras) that
the role needs (the frameworks of its experts, JAX for a learned router, the web UI for `ddm up`)."""

from __future__ import annotations

import functools
import importlib.util
from importlib.metadata import PackageNotFoundError, packages_distributions, version

from ddm.ops.doctor.checks import FAIL, OK, Check
from ddm.ops.extras import DISTRIBUTION, EXTRA_OF_MODULE

# import names of the base install's dependencies (pyproject.toml [project] dependencies)
BASE_MODULES = ("numpy", "msgpack", "msgpack_numpy", "pika", "redis", "PIL", "tqdm", "prometheus_client")


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return packages_distributions()  # scans every installed package: once per process


def _version(module: str) -> str | None:
    """The installed version of the distribution that provides `module`, or None when it is absent."""
    if importlib.util.find_spec(module) is None:
        return None
    for dist in _distributions().get(module, []):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "?"


def needed_extras(role: str, frameworks: dict[int, str], router_kind: str | None) -> set[str]:
    """The extras a role needs here: its experts' frameworks, JAX for a learned router, ui for `all`."""
    from ddm.workers.frameworks import expert_framework

    needed: set[str] = set()
    if role in ("all", "expert"):
        needed |= {expert_framework(name).extra for name in frameworks.values()}
    if role in ("all", "router") and router_kind == "learned":
        needed.add("jax")
    if role == "all":
        needed.add("ui")
    return needed


def packages(needed: set[str]) -> Check:
    missing_base = [m for m in BASE_MODULES if _version(m) is None]
    if missing_base:
        fix = f"reinstall the base package: pip install '{DISTRIBUTION}'"
        return Check("packages", FAIL, f"base modules missing: {', '.join(missing_base)}", fix)
    extras: dict[str, list[str]] = {}
    for module, extra in EXTRA_OF_MODULE.items():
        extras.setdefault(extra, []).append(module)
    parts, missing = [], []
    for extra, modules in sorted(extras.items()):
        versions = {m: _version(m) for m in modules}
        absent = [m for m, v in versions.items() if v is None]
        if absent and extra in needed:
            missing.append(extra)
        first = modules[0]
        parts.append(
            f"[{extra}] " + (f"missing {', '.join(absent)}" if absent else f"{first} {versions[first]}")
        )
    detail = "; ".join(parts) + f"; needed here: {', '.join(sorted(needed)) or 'the base install only'}"
    if missing:
        fix = " and ".join(f"pip install '{DISTRIBUTION}[{extra}]'" for extra in sorted(missing))
        return Check("packages", FAIL, detail, fix)
    return Check("packages", OK, detail)
