"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def env(monkeypatch, settings, tmp_path):
    """The test's broker, Redis and prefix; no data folder or deployment named; run from an empty
    folder (so no shipped deployment is found either)."""
    monkeypatch.setenv("DDM_PREFIX", settings.prefix)
    monkeypatch.setenv("DDM_AMQP_URL", settings.amqp_url)
    monkeypatch.setenv("DDM_REDIS_URL", settings.redis_url)
    monkeypatch.delenv("DDM_DATA_DIR", raising=False)
    monkeypatch.delenv("DDM_DEPLOYMENT", raising=False)
    monkeypatch.chdir(tmp_path)
    return settings
