"""`ddm result` renders a job from what the job recorded (issue 41 part 3, issue 40 part 2): its
deployment's class names and picture space, whatever deployment serves the prefix now. Before, an MNIST
job of 3 and 8 read "Dress, Bag" once Fashion-MNIST served the same prefix."""

from __future__ import annotations

import json

import numpy as np
import redis

from ddm.ops.cli import main
from ddm.router.store import JobStore
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY
from tests.support.descriptors import demo_descriptor

FASHION = ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot")


def test_an_old_job_keeps_its_class_names_after_another_deployment_serves(env, capsys, tmp_path):
    r = redis.Redis.from_url(env.redis_url)
    store = JobStore(r, env.names, job_ttl_s=600)
    spec = JobSpec.new([3, 8], steps=2, strategy="top1", guidance=1.0, seed=1)
    store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec, LEGACY), spec, deployment="mnist")
    x = np.linspace(-1, 1, 2 * 32 * 32, dtype=np.float32).reshape(2, 1, 32, 32)
    assert store.finish(spec.job_id, x)
    # now Fashion-MNIST serves the prefix: same shape and range, other class names
    store.publish_descriptor(demo_descriptor(name="fashion", class_names=FASHION), 60)

    assert main(["result", spec.job_id, "--out", str(tmp_path / "grid.png")]) == 0
    out = capsys.readouterr().out
    assert "(labels 3,8)" in out and "Dress" not in out, out
    assert main(["result", spec.job_id, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["deployment"] == "mnist" and got["space"]["class_names"] == list(LEGACY.class_names)
    r.close()
