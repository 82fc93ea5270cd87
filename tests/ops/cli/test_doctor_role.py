"""`ddm doctor` with no --role guesses what this machine does, and says so: client where there is no
deployment file to serve (outside the repository) or no serving extra (a client-only install), all
otherwise. It used to assume all, and failed where everything a client needs worked. Role all also
says whether a router serves (the descriptor in Redis), as a skip when none does yet. Real RabbitMQ and
Redis; a missing extra is simulated by hiding its modules from find_spec in this process."""

from __future__ import annotations

import importlib.util
import json

from ddm.ops.cli import main
from ddm.router.deployment_loader import describe, load_policy
from ddm.router.store import JobStore
from ddm.runtime.redis_conn import connect_redis
from ddm.schema.deployment import Deployment


def serve(settings, path, router_id: str = "r-1") -> None:
    """Publish the descriptor of the deployment at `path`, as its router does."""
    deployment = Deployment.load(path)
    r = connect_redis(settings.redis_url)
    JobStore(r, settings.names, 60).publish_descriptor(
        describe(deployment, load_policy(deployment), router_id), 60
    )
    r.close()


def doctor(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["doctor", *argv, "--json"])
    report = json.loads(capsys.readouterr().out)
    return code, report


def test_outside_the_repository_the_role_is_client(env, label_split_deployment, capsys):
    serve(env, label_split_deployment)
    code, report = doctor(capsys)
    assert code == 0, report
    assert report["role"] == "client" and "no deployment file to serve here" in report["role_from"]
    assert main(["doctor"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert (
        first.startswith("role client (guessed: no deployment file to serve here") and "--role all" in first
    )


def test_a_client_only_install_is_a_client(env, label_split_deployment, monkeypatch, capsys):
    real = importlib.util.find_spec
    serving = {"torch", "safetensors", "jax", "jaxlib", "flax", "optax", "flask", "flask_socketio"}

    def find_spec(name, *args, **kwargs):
        return None if name.split(".")[0] in serving else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    serve(env, label_split_deployment)
    code, report = doctor(capsys, "--deployment", str(label_split_deployment))
    assert code == 0, report
    assert report["role"] == "client" and "a client-only install" in report["role_from"]


def test_with_a_deployment_and_extras_the_role_is_all_and_says_who_serves(
    env, label_split_deployment, capsys
):
    code, report = doctor(capsys, "--deployment", str(label_split_deployment))
    checks = {c["name"]: c for c in report["checks"]}
    assert report["role"] == "all" and report["role_from"].startswith("guessed: deployment ")
    assert code == 0, report  # nobody serves yet: news for `all`, not a fault
    assert checks["serving"]["status"] == "skip" and "`ddm up`" in checks["serving"]["detail"]
    serve(env, label_split_deployment)
    code, report = doctor(capsys, "--role", "all", "--deployment", str(label_split_deployment))
    checks = {c["name"]: c for c in report["checks"]}
    assert code == 0 and report["role_from"] == "--role"
    assert checks["serving"]["status"] == "ok" and "router r-1 serves 'test'" in checks["serving"]["detail"]
