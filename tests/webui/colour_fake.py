"""A fake colour deployment for the web UI tests (issue 25, part 6), until the emoji deployment ships:
the descriptor a router serving four k-means experts on the 9 emoji groups (3x32x32 RGB) would publish,
each expert with a different card, and SYNTHETIC frames (seeded noise blending into a coloured disk per
image, not the output of any model) written as the router writes them."""

from __future__ import annotations

import colorsys
import time
from types import SimpleNamespace

import numpy as np

from ddm.ops.data.emoji_list import GROUPS
from ddm.schema.descriptor import DeploymentDescriptor, ExpertInfo
from ddm.schema.messages import Frame, JobSpec
from ddm.schema.sample_space import SampleSpace
from ddm.schema.strategy import accepted_strategies
from tests.support.services import REDIS_URL

SPACE = SampleSpace((3, 32, 32), (-1.0, 1.0), len(GROUPS), GROUPS)
STEPS = 8
COSINE = {"name": "cosine", "s": 0.008}
LINEAR = {"name": "linear", "beta_min": 0.1, "beta_max": 20.0}
# (framework, architecture, objective, schedule, time convention) of the four fake experts
CARDS = (
    ("torch", "unet", "flow-velocity", None, "t0-noise"),
    ("jax", "dit", "ddpm-eps", COSINE, "t0-data"),
    ("torch", "dit", "flow-velocity", None, "t0-noise"),
    ("jax", "unet", "ddpm-v", LINEAR, "t0-noise"),
)


def emoji_descriptor() -> DeploymentDescriptor:
    """What a router serving four k-means experts on the emoji groups would publish (none is trained)."""
    experts = []
    for k, (framework, architecture, objective, schedule, convention) in enumerate(CARDS):
        counts = tuple(300 if y % 4 == k else 20 for y in range(len(GROUPS)))  # uneven: k-means-like
        card = {
            "framework": framework,
            "architecture": architecture,
            "objective": objective,
            "schedule": schedule,
            "time_convention": convention,
        }
        experts.append(ExpertInfo(k, framework, "cpu", tuple(range(len(GROUPS))), "kmeans", counts, card))
    return DeploymentDescriptor(
        name="emoji (fake cluster)",
        router_kind="learned",
        experts=tuple(experts),
        strategies=accepted_strategies(len(experts), has_oracle=False),
        default_strategy="topk:2",
        default_guidance=1.5,
        class_names=GROUPS,
        router_id="w-router",
        published_at=time.time(),
        sample_space=SPACE,
    )


def disks(n: int) -> np.ndarray:
    """float32 [n, 3, 32, 32] in [-1, 1]: a disk of hue i/n on a grey ground per image i."""
    yy, xx = np.mgrid[0:32, 0:32]
    inside = (yy - 15.5) ** 2 + (xx - 15.5) ** 2 < 11**2
    out = np.full((n, 3, 32, 32), -0.4, np.float32)
    for i in range(n):
        rgb = np.array(colorsys.hsv_to_rgb(i / n, 0.85, 0.95), np.float32) * 2 - 1
        out[i][:, inside] = rgb[:, None]
    return out


def synthetic_x(n: int, step: int) -> np.ndarray:
    """The fake trajectory at `step`: x_t = t * disks + (1 - t) * noise, t = step / STEPS."""
    t = step / STEPS
    noise = np.random.default_rng(0).standard_normal((n, 3, 32, 32)).astype(np.float32)
    return t * disks(n) + (1 - t) * noise


def beat(fake, worker_id: str, role: str, framework: str | None = None, expert_id: int | None = None):
    from ddm.runtime.heartbeat import Heartbeat

    static = {"role": role, "host": "fake-host", "region": "fake-region", "pid": 1}
    counters = {}
    if expert_id is not None:
        static |= {"expert_id": expert_id, "framework": framework, "device": "cpu"}
        counters = {"batches": 3, "mean_batch_size": 2.5, "mean_compute_ms": 1.5}
    heartbeat = Heartbeat(REDIS_URL, fake.names, worker_id, static, ttl_s=60)
    try:
        assert heartbeat.beat(SimpleNamespace(fields=lambda: counters)), "Redis took no beat"
    finally:
        heartbeat.close()


def write_frame(fake, spec: JobSpec, step: int) -> np.ndarray:
    """Step `step` of the job, written as the router writes it; returns its latent."""
    x = synthetic_x(spec.n, step)
    weights = np.zeros((spec.n, len(CARDS)), np.float32)
    for i in range(spec.n):  # top-2 of a made-up router: two experts per image
        weights[i, i % 4], weights[i, (i + 1) % 4] = 0.7, 0.3
    experts = list(range(len(CARDS)))
    frame = Frame.from_latent(spec.job_id, step, step / STEPS, x, experts, weights, 12.5)
    fake.store.write_step(frame, x, 12.5)
    return x
