"""The doctor's order of checks: settings first (everything else reads them), then the services and
their permissions, what the role serves (the deployment file and its checkpoints; for a client, the
deployment the running router serves), the packages the role needs, the data folder, the emoji
dataset's system packages."""

from __future__ import annotations

import contextlib

from ddm.ops.doctor import emoji, files, packages, services
from ddm.ops.doctor.checks import FAIL, OK, SKIP, Check, DoctorOptions, guarded
from ddm.schema.errors import ConfigError, expected


def _settings() -> tuple[Check, object | None]:
    from ddm.schema.settings import Settings

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        fix = "fix that DDM_* variable (or unset it for its default)"
        return Check("settings", FAIL, str(exc), fix), None
    return Check("settings", OK, f"prefix {settings.prefix!r}, queue type {settings.queue_type}"), settings


def _expert_ids(options: DoctorOptions, dep) -> list[int]:
    """The experts whose needs are checked: none for a client or router, one with --expert."""
    if dep is None or options.role in ("client", "router"):
        return []
    ids = [e.id for e in dep.experts]
    if options.expert is None:
        return ids
    if options.expert not in ids:
        raise ConfigError(expected(f"--expert among the deployment's experts {ids}", options.expert))
    return [options.expert]


def run_doctor(options: DoctorOptions) -> list[Check]:
    """Every check, in order; a check that cannot run because an earlier one failed is a skip."""
    settings_check, settings = _settings()
    checks = [settings_check]
    client = options.role == "client"
    dep_check, dep = (Check("deployment file", SKIP, "a client needs none"), None)
    if not client and settings is None and options.deployment is None:
        dep_check = Check("deployment file", SKIP, "the settings do not parse (DDM_DEPLOYMENT is one)")
    elif not client:
        dep_check, dep = files.deployment(options.deployment)
    experts = _expert_ids(options, dep)
    conn = r = None
    try:
        if settings is None:
            names = ("rabbitmq", "redis", "rabbitmq permissions", "redis permissions")
            checks += [Check(name, SKIP, "the settings do not parse") for name in names]
        else:
            broker_check, conn = services.broker(settings)
            redis_check, r = services.redis_server(settings)
            checks += [broker_check, redis_check]
            checks.append(_broker_permissions(conn, settings, experts, options.role != "expert"))
            checks.append(_redis_permissions(r, settings))
            if options.role in ("client", "all"):
                serving = _serving(settings, dep, needed=client) if r is not None else None
                checks.append(serving or Check("serving", SKIP, "no Redis"))
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        if r is not None:
            r.close()
    checks.append(dep_check)
    frameworks: dict[int, str] = {}
    if dep is None:
        checks.append(Check("checkpoints", SKIP, "no deployment file to check"))
    else:
        ckpt_check, frameworks = files.checkpoints(dep, experts, router=options.role in ("all", "router"))
        checks.append(ckpt_check)
        if options.role == "all" and dep.conditioning.kind == "text":  # `ddm up` runs its text encoder
            checks.append(guarded("text encoder", lambda: files.text_encoder(dep)))
    router_kind = dep.router.kind if dep is not None else None
    needed = packages.needed_extras(options.role, frameworks, router_kind)
    checks.append(guarded("packages", lambda: packages.packages(needed)))
    checks.append(guarded("data folder", lambda: files.data_folder(options.data_dir)))
    checks.append(guarded("emoji sources", emoji.emoji_sources))
    checks.append(guarded("emoji captions", emoji.emoji_captions))
    return checks


def _broker_permissions(conn, settings, experts: list[int], jobs: bool) -> Check:
    name = "rabbitmq permissions"
    if conn is None:
        return Check(name, SKIP, "RabbitMQ does not answer")
    return guarded(name, lambda: services.broker_permissions(conn, settings, experts, jobs))


def _redis_permissions(r, settings) -> Check:
    name = "redis permissions"
    if r is None:
        return Check(name, SKIP, "Redis does not answer")
    return guarded(name, lambda: services.redis_permissions(r, settings))


def _serving(settings, dep, needed: bool) -> Check:
    """What a client submits to: the deployment a running router publishes (its descriptor). A client
    needs one (FAIL without); for `all` it is news, not a fault (a skip): `ddm up` has not run yet, or
    it serves, and whether it serves the deployment file checked here."""
    from ddm.client.client import Client
    from ddm.client.errors import NoDeploymentError

    with Client(settings=settings) as client:
        try:
            d = client.deployment()
        except NoDeploymentError as exc:
            if needed:
                return Check("serving", FAIL, str(exc), "start a router: `ddm up` or `ddm worker router`")
            return Check("serving", SKIP, f"no router serves under prefix {settings.prefix!r} yet: `ddm up`")
    detail = f"router {d.router_id} serves {d.name!r}: strategies {', '.join(d.strategies)}"
    if dep is not None and dep.name != d.name:
        detail += f" (not {dep.name!r}, the deployment file checked here)"
    return Check("serving", OK, detail)
