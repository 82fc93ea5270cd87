"""What tests build instead of training or running things: checkpoint folders (a real meta.json with
empty or random weights), deployment files, and a fake cluster that writes jobs, frames and heartbeats
into Redis through the router's own writer (router/store.py) and the schema's records, and a synthetic
image data set."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import redis

from ddm.ops.data.dataset import Dataset
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.messages import Frame, JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.settings import Settings

from .services import AMQP_URL, REDIS_URL

# (checkpoint folder, framework, classes): the seed's shape, digits 0-4 in PyTorch and 5-9 in JAX.
LABEL_SPLIT = (("e0", "torch", range(0, 5)), ("e1", "jax", range(5, 10)))

# -- checkpoint folders and deployment files ---------------------------------------------------------


def checkpoint_meta(framework: str, classes: Iterable[int], preset: str = "tiny", expert: int = 0) -> dict:
    """An expert's checkpoint meta record as training writes it, trained on `classes` (100 images each),
    from the record's one builder."""
    from ddm.ops.random_experts import RANDOM_PARTITION
    from ddm.workers.checkpoint import expert_meta

    wanted = set(classes)
    counts = [100 if c in wanted else 0 for c in range(10)]
    return expert_meta(framework, preset, expert, RANDOM_PARTITION, counts, steps=0)


def write_fake_checkpoint(folder: Path, framework: str, classes: Iterable[int], expert: int = 0) -> Path:
    """meta.json and an empty weights file: enough for every check that reads metas and loads no
    weights (the client's and the UI's deployment checks, `ddm up`'s plan)."""
    from ddm.workers.frameworks import expert_framework

    write_meta(folder, checkpoint_meta(framework, classes, expert=expert))  # the record's one writer
    (folder / expert_framework(framework).weights_file).write_bytes(b"")
    return folder


def write_deployment(
    root: Path, checkpoints: Iterable[str], router: str = "oracle", name: str = "fake", **top_level
) -> Path:
    """root/deployment.toml serving `checkpoints` (folders relative to root) on the CPU as experts
    0..K-1; a learned router reads root/router. top_level: more settings (guidance=1.5, strategy=...)."""
    experts = [(checkpoint, "cpu") for checkpoint in checkpoints]
    router_checkpoint = "router" if router == "learned" else None
    path = root / "deployment.toml"
    return Deployment.build(path, experts, router, router_checkpoint, name=name, **top_level).write()


def write_fake_deployment(
    root: Path, experts=LABEL_SPLIT, router: str = "oracle", name: str = "fake", **top_level
) -> Path:
    """A deployment of fake checkpoints: experts is [(folder, framework, classes)]."""
    for k, (folder, framework, classes) in enumerate(experts):
        write_fake_checkpoint(root / folder, framework, classes, expert=k)
    return write_deployment(root, [folder for folder, _, _ in experts], router, name, **top_level)


def write_random_deployment(
    root: Path, experts, router: str = "oracle", sample_space=None, **top_level
) -> Path:
    """A deployment of random-weight experts that really serve: experts is [(folder, framework,
    classes, seed)]. No training, so a session fixture builds one in seconds. sample_space: the
    experts' cards' and the file's [sample_space] (None: the legacy space, no table)."""
    from ddm.ops.random_experts import make_random_expert

    for folder, framework, classes, seed in experts:
        if sample_space is None:
            make_random_expert(root / folder, framework, classes, seed=seed)
        else:
            make_random_expert(root / folder, framework, classes, seed=seed, sample_space=sample_space)
    if sample_space is not None:
        top_level["sample_space"] = sample_space
    return write_deployment(root, [folder for folder, *_ in experts], router, "test", **top_level)


def descriptor_of(path: Path, router_id: str = "w-router", **changes) -> DeploymentDescriptor:
    """The descriptor a router serving the deployment at `path` publishes (with `changes`)."""
    from ddm.router.deployment_loader import describe, load_policy
    from ddm.schema.deployment import Deployment

    deployment = Deployment.load(path)
    return dataclasses.replace(describe(deployment, load_policy(deployment), router_id), **changes)


# -- a cluster in Redis ------------------------------------------------------------------------------


class FakeCluster:
    """Writes under one prefix what the router and the workers write, through their own writers: the
    deployment descriptor and jobs through the router's store (router/store.py), heartbeats through the
    workers' Heartbeat (the schema's WorkerHeartbeat record)."""

    def __init__(self, prefix: str):
        from ddm.router.store import JobStore

        self.prefix = prefix
        self.settings = Settings(prefix=prefix, amqp_url=AMQP_URL, redis_url=REDIS_URL)
        self.names = self.settings.names
        self.r = redis.Redis.from_url(REDIS_URL)
        self.store = JobStore(self.r, self.names, job_ttl_s=600)

    def publish(self, path: Path, **changes) -> DeploymentDescriptor:
        """The descriptor of the deployment at `path` (with `changes`), published as its router does."""
        descriptor = descriptor_of(path, "w-router", **changes)
        self.store.publish_descriptor(descriptor, 60)
        return descriptor

    def beat(self, worker_id: str, role: str = "expert", expert_id: int | None = None, **fields) -> None:
        """One heartbeat of worker `worker_id`; an expert's says it served 3 batches. `fields` go on top."""
        from ddm.runtime.heartbeat import Heartbeat

        static = {"role": role, "host": "testhost", "region": "test-region", "pid": 1}
        counters = {}
        if expert_id is not None:
            static |= {
                "expert_id": expert_id,
                "framework": "torch" if expert_id == 0 else "jax",
                "device": "cpu",
            }
            counters = {"batches": 3, "mean_batch_size": 2.5, "mean_compute_ms": 1.5}
        heartbeat = Heartbeat(REDIS_URL, self.names, worker_id, static, ttl_s=60)
        try:
            assert heartbeat.beat(SimpleNamespace(fields=lambda: counters), **fields), "Redis took no beat"
        finally:
            heartbeat.close()

    def all_workers(self) -> None:
        self.beat("w-e0", expert_id=0)
        self.beat("w-e1", expert_id=1)
        self.beat("w-router", role="router", jobs_running=0)

    def start_job(self, labels=(1, 7), steps: int = 6) -> JobSpec:
        """A running job, its spec resolved as the router resolves it (oracle, guidance 1)."""
        spec = JobSpec.new(list(labels), steps=steps, strategy="oracle", guidance=1.0)
        self.store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec))
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


# -- a data set ----------------------------------------------------------------------------------------


def synthetic(n_per_class: int = 20, seed: int = 0, name: str = "mnist", split: str = "test") -> Dataset:
    """Class c: a bright 6x6 block (top row for 0-4, bottom for 5-9, column by c % 5), a bar shared by
    the group 0-4, and noise: the two groups are the dominant structure, the classes the next one."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(10), n_per_class)
    rng.shuffle(labels)
    images = rng.integers(0, 40, (labels.size, 28, 28)).astype(np.uint8)
    for i, c in enumerate(labels):
        y, x = (3 if c < 5 else 19), 1 + 5 * (c % 5)
        images[i, y : y + 6, x : x + 6] = 255
        images[i, (0 if c < 5 else 14) : (14 if c < 5 else 28), 27] = 255  # a group-wide stripe
        images[i, 0:2, :] = 200 if c < 5 else 0
    return Dataset(name, split, images, labels)
