"""Fixtures for the web UI tests: an app on this test's prefix of the real Redis and RabbitMQ, and a
fake cluster (jobs, frames and heartbeats written as the router and workers write them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fakes import FakeCluster, write_fake_deployment


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
