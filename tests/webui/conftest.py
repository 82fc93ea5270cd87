"""Fixtures for the web UI tests: an app on a unique prefix of the real Redis and RabbitMQ, fake
heartbeats, and synthetic jobs written exactly as the router writes them (router/store.py)."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import redis

from ddm.router.store import JobStore
from ddm.schema.messages import Frame, JobSpec
from ddm.schema.settings import Settings
from tests.pipeline.harness import cleanup_prefix

AMQP_URL = os.environ.get("DDM_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("DDM_REDIS_URL", "redis://127.0.0.1:6379/0")


def write_fake_deployment(root: Path, name: str = "fake") -> Path:
    """Two experts (torch 0-4, jax 5-9) with metas only: enough for every check the UI makes."""
    from ddm.workers.checkpoint import WEIGHTS_FILE
    from ddm.workers.config import get_preset

    lines = [f"name = {json.dumps(name)}"]
    for i, (framework, classes) in enumerate([("torch", range(5)), ("jax", range(5, 10))]):
        folder = root / f"e{i}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / WEIGHTS_FILE[framework]).write_bytes(b"")
        counts = [100 if c in classes else 0 for c in range(10)]
        meta = {"framework": framework, "config": get_preset("tiny").to_dict(), "label_counts": counts}
        (folder / "meta.json").write_text(json.dumps(meta))
        lines += ["[[experts]]", f"id = {i}", f'checkpoint = "e{i}"', 'device = "cpu"']
    lines += ["[router]", 'kind = "oracle"']
    (root / "deployment.toml").write_text("\n".join(lines) + "\n")
    return root / "deployment.toml"


class FakeCluster:
    """Writes jobs, frames and heartbeats under one prefix as the router and workers would."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.settings = Settings(prefix=prefix, amqp_url=AMQP_URL, redis_url=REDIS_URL)
        self.names = self.settings.names
        self.r = redis.Redis.from_url(REDIS_URL)
        self.store = JobStore(self.r, self.names, job_ttl_s=600)

    def beat(self, worker_id: str, role: str = "expert", expert_id: int | None = None, **fields) -> None:
        record = {"worker_id": worker_id, "role": role, "host": "testhost", "region": "test-region"}
        record |= {"updated_at": f"{time.time():.3f}", "pid": "1"}
        if expert_id is not None:
            record |= {"expert_id": expert_id, "framework": "torch" if expert_id == 0 else "jax"}
            record |= {"device": "cpu", "batches": 3, "mean_batch_size": 2.5, "mean_compute_ms": 1.5}
        record |= fields
        key = self.names.worker(worker_id)
        self.r.hset(key, mapping=record)
        self.r.expire(key, 60)
        self.r.sadd(self.names.workers_index, worker_id)

    def all_workers(self) -> None:
        self.beat("w-e0", expert_id=0)
        self.beat("w-e1", expert_id=1)
        self.beat("w-router", role="router", jobs_running=0)

    def start_job(self, labels=(1, 7), steps: int = 6) -> JobSpec:
        spec = JobSpec.new(list(labels), steps=steps, strategy="oracle")
        self.store.start(spec.job_id, "w-router", 0, spec)
        return spec

    def frame(self, spec: JobSpec, step: int) -> Frame:
        n = spec.n
        x = np.full((n, 1, 32, 32), step / spec.steps * 2 - 1, np.float32)
        weights = np.zeros((n, 2), np.float32)
        for i, y in enumerate(spec.labels):
            weights[i, 0 if y < 5 else 1] = 1.0
        experts = sorted({0 if y < 5 else 1 for y in spec.labels})
        frame = Frame.from_latent(spec.job_id, step, step / spec.steps, x, experts, weights, 12.5)
        self.store.write_step(frame, x, 12.5)
        return frame

    def finish(self, spec: JobSpec) -> None:
        self.store.finish(spec.job_id, np.zeros((spec.n, 1, 32, 32), np.float32))

    def fail(self, spec: JobSpec, error: str) -> None:
        self.store.fail(spec.job_id, error)

    def close(self) -> None:
        self.r.close()


@pytest.fixture
def prefix():
    p = f"t{uuid.uuid4().hex[:10]}."
    yield p
    cleanup_prefix(p)


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
    """make_app(**UIConfig overrides) -> Flask app on the test prefix; closed after the test."""
    from ddm.webui.app import create_app
    from ddm.webui.config import UIConfig

    apps = []

    def make(**overrides):
        config = UIConfig(settings=fake.settings, deployment=overrides.pop("deployment", fake_deployment))
        config = UIConfig(**{**config.__dict__, **overrides})
        app = create_app(config=config)
        app.extensions["ddm"].monitor.max_age_s = 0.0  # no snapshot caching in tests
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["ddm"].close()
