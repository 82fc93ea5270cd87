"""Fixtures for the web UI tests: an app on this test's prefix of the real Redis and RabbitMQ, and a
fake cluster (jobs, frames and heartbeats written as the router and workers write them)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddm.ops.up.supervisor import stop_processes
from ddm.ops.up.ui import PRODUCTION_COMMAND
from tests.support.fakes import FakeCluster, write_fake_deployment
from tests.support.harness import DDM_CLI, service_env
from tests.support.services import free_port, wait_healthy


@pytest.fixture
def fake(prefix):
    f = FakeCluster(prefix)
    yield f
    f.close()


@pytest.fixture
def fake_deployment(tmp_path) -> Path:
    return write_fake_deployment(tmp_path / "dep")


@pytest.fixture
def make_app(fake, fake_deployment):
    """make_app(deployment=path (default: the fake one; None: no router serving), **UIConfig overrides)
    -> Flask app on the test prefix, the deployment's descriptor published; closed after the test."""
    from ddm.webui.app import create_app
    from ddm.webui.config import UIConfig

    apps = []

    def make(**overrides):
        deployment = overrides.pop("deployment", fake_deployment)
        if deployment is not None:
            fake.publish(deployment)
        config = UIConfig(**{**UIConfig(settings=fake.settings).__dict__, **overrides})
        app = create_app(config=config)
        app.extensions["ddm"].monitor.max_age_s = 0.0  # no snapshot caching in tests
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["ddm"].close()


@pytest.fixture
def ui_server(fake, tmp_path):
    """ui_server(**DDM_UI_* settings) -> the URL of `ddm ui` (a real server process, Werkzeug) on the
    test prefix, once its /healthz answers; stopped after the test."""
    procs = []

    def start(**env: str) -> str:
        port = free_port()
        log = open(tmp_path / f"ui-{port}.log", "wb")  # noqa: SIM115 - owned by the process
        argv = [*DDM_CLI, "ui", "--port", str(port)]
        env = service_env(fake.prefix, **env)
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2):
                    return url
            except OSError:
                output = (tmp_path / f"ui-{port}.log").read_text()
                assert proc.poll() is None and time.monotonic() < deadline, "the UI did not start:\n" + output
                time.sleep(0.2)

    yield start
    stop_processes(procs, grace_s=5)


@dataclass
class ProductionUI:
    url: str
    pid: int  # gunicorn's worker process: the one that serves (and holds the memory)
    log: Path


@pytest.fixture
def production_ui(fake, fake_deployment, tmp_path):
    """production_ui(**DDM_UI_* settings) -> ProductionUI: the gunicorn command (one gevent worker) on
    the test prefix, the fake deployment published, once /healthz answers; stopped after the test."""
    from tests.support.services import free_port

    procs, logs = [], []

    def start(**env: str) -> ProductionUI:
        fake.publish(fake_deployment)  # a serving router's descriptor, as the page reads it
        port = free_port()
        env = service_env(
            fake.prefix, **{"DDM_UI_BIND": f"127.0.0.1:{port}", "DDM_LOG_LEVEL": "warning", **env}
        )
        argv = [sys.executable, "-m", *shlex.split(PRODUCTION_COMMAND)]  # python -m gunicorn -c ... 'app()'
        path = tmp_path / f"ui-{port}.log"
        logs.append(open(path, "wb"))  # noqa: SIM115 - owned by the process
        proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=logs[-1], stderr=subprocess.STDOUT)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, path)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert children, "gunicorn has no worker process"
        return ProductionUI(url, int(children[0]), path)

    yield start
    stop_processes(procs, grace_s=20)
    for log in logs:
        log.close()
