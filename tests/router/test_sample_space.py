"""The router sized by the deployment's sample space: noise, label tables, mixing and the learned
router's net read any (C, H, W) and class count; the legacy space's noise is the same call as before."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.router.policies import RoutingPolicy, build_policy
from ddm.router.sampler import JobArrays, initial_noise, sample_local
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY, SampleSpace

RGB = SampleSpace((3, 16, 16), num_classes=3, class_names=("r", "g", "b"))


def test_initial_noise_is_sized_by_the_space_and_the_legacy_call_is_unchanged():
    spec = JobSpec("j", (0, 1), seed=5)
    legacy = np.random.default_rng(5).standard_normal((2, 1, 32, 32), dtype=np.float32)
    assert np.array_equal(initial_noise(spec), legacy) and np.array_equal(initial_noise(spec, LEGACY), legacy)
    assert initial_noise(spec, RGB).shape == (2, 3, 16, 16)


def test_sample_local_runs_in_the_jobs_space_with_its_null_class():
    seen = []

    def expert(x, t, y, g):
        seen.append((x.shape[1:], y.copy(), g.copy()))
        return -x

    counts = np.array([[5, 5, 0], [0, 5, 5]])
    policy = build_policy("label-prior", counts)
    assert policy.router.probs(None, None, np.array([3])).shape == (1, 2)  # the null row: label 3
    spec = JobSpec("j", (0, 2, 1), steps=2, strategy="full", guidance=2.0, seed=1)
    x = sample_local({0: expert, 1: expert}, policy, ResolvedJob.of(spec, RGB))
    assert x.shape == (3, 3, 16, 16) and all(shape == (3, 16, 16) for shape, *_ in seen)
    arrays = JobArrays.of(ResolvedJob.of(JobSpec("j", (0, 3), strategy="full", guidance=2.0), RGB))
    assert arrays.guidance.tolist() == [2.0, 1.0]  # the null class of RGB is 3
    with pytest.raises(Exception, match=r"labels in 0..2, or 3"):
        ResolvedJob.of(JobSpec("j", (4,), strategy="full", guidance=1.0), RGB)


def test_a_learned_router_reads_an_rgb_space_and_a_legacy_checkpoint_config_means_1x32x32(tmp_path):
    from ddm.router.learned import load_router
    from ddm.router.router_net import RouterConfig
    from ddm.router.train_router import train_router
    from ddm.workers.training import FitOptions

    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (16, 3, 16, 16)).astype(np.float32)
    labels, clusters = rng.integers(0, 3, 16), rng.integers(0, 2, 16)
    cfg = RouterConfig.for_space(2, RGB, channels=4, emb_dim=8, hidden=8)
    assert cfg.check_space(RGB) == "" and "input 3x16x16 vs 1x32x32" in cfg.check_space(LEGACY)
    meta = train_router(
        images,
        labels,
        clusters,
        cfg,
        tmp_path,
        {"partition": {}},
        fit=FitOptions(steps=2, batch=4, progress=False),
    )
    assert meta["config"]["in_channels"] == 3 and meta["config"]["image_size"] == 16
    router = load_router(tmp_path, buckets=(1, 4))
    p = router.probs(images[:3], np.full(3, 0.5, np.float32), np.array([0, 1, 3]))
    assert p.shape == (3, 2) and np.allclose(p.sum(1), 1.0, atol=1e-5)
    legacy = RouterConfig(
        **{k: v for k, v in RouterConfig(2).to_dict().items() if k not in ("in_channels", "image_size")}
    )
    assert (legacy.in_channels, legacy.image_size, legacy.num_classes) == (1, 32, 10)
    assert isinstance(RoutingPolicy(router).num_experts, int)
