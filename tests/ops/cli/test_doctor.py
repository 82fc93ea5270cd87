"""`ddm doctor` against the real RabbitMQ and Redis: it passes when the set-up is sound, and each
failure (a service down, a broken checkpoint, an empty data folder, no router serving) exits 1 and
names its fix. Redis is never stopped here: DDM_REDIS_URL points at a closed port instead."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ddm.ops.cli import main
from ddm.ops.data.catalog import DATASETS
from ddm.router.deployment_loader import describe, load_policy
from ddm.router.store import JobStore
from ddm.runtime.redis_conn import connect_redis
from ddm.schema.deployment import Deployment
from tests.support.data import SHARED, needs_shared_mnist


def doctor(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["doctor", *argv, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (code == 0)
    return code, {c["name"]: c for c in report["checks"]}


def test_passes_when_everything_is_up(env, label_split_deployment, capsys):
    code, checks = doctor(capsys, "--deployment", str(label_split_deployment))
    assert code == 0, checks
    for name in ("settings", "rabbitmq", "redis", "rabbitmq permissions", "redis permissions", "packages"):
        assert checks[name]["status"] == "ok", checks[name]
    assert "expert 0 (torch) unet tiny, model.safetensors sha256" in checks["checkpoints"]["detail"]
    assert "expert 1 (jax) unet tiny, model.msgpack sha256" in checks["checkpoints"]["detail"]
    assert f"{env.prefix}ddm.expert.1" in checks["rabbitmq permissions"]["detail"]
    # nobody named one (only training needs it): a skip, unless a dataset's system-wide offline copy is
    # installed (Debian's dataset-fashion-mnist), which every data command finds by itself
    offline = any(Path(d).is_dir() for spec in DATASETS.values() for d in spec.offline_dirs)
    assert checks["data folder"]["status"] == ("ok" if offline else "skip"), checks["data folder"]
    assert main(["doctor", "--deployment", str(label_split_deployment)]) == 0
    assert "all checks passed" in capsys.readouterr().out


def test_fails_naming_the_fix_when_redis_is_down(env, monkeypatch, capsys):
    monkeypatch.setenv("DDM_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    assert main(["doctor", "--role", "client"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  redis" in out and "redis://127.0.0.1:1/0" in out
    assert "redis-server --daemonize yes" in out  # how to fix it
    assert "1 check(s) failed" in out or "check(s) failed" in out
    code, checks = doctor(capsys, "--role", "client")
    assert code == 1 and checks["redis"]["status"] == "FAIL" and checks["redis"]["fix"]
    assert checks["redis permissions"]["status"] == "skip"
    assert checks["rabbitmq"]["status"] == "ok"


def test_a_client_needs_a_serving_router_and_no_deployment_file(env, label_split_deployment, capsys):
    code, checks = doctor(capsys, "--role", "client")
    assert code == 1 and checks["serving"]["status"] == "FAIL"
    assert "ddm up" in checks["serving"]["fix"]
    assert checks["deployment file"]["status"] == "skip" and checks["checkpoints"]["status"] == "skip"
    deployment = Deployment.load(label_split_deployment)
    r = connect_redis(env.redis_url)
    JobStore(r, env.names, 60).publish_descriptor(describe(deployment, load_policy(deployment), "r-1"), 60)
    r.close()
    code, checks = doctor(capsys, "--role", "client")
    assert code == 0, checks
    assert "router r-1 serves" in checks["serving"]["detail"]


def test_a_broken_checkpoint_fails_with_its_fix(env, label_split_deployment, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(label_split_deployment.parent, copy)
    (copy / "e1_jax" / "model.msgpack").unlink()
    code, checks = doctor(capsys, "--deployment", str(copy / label_split_deployment.name))
    assert code == 1
    assert (
        checks["checkpoints"]["status"] == "FAIL"
        and "model.msgpack is missing" in checks["checkpoints"]["detail"]
    )
    assert "copy the checkpoint folder again" in checks["checkpoints"]["fix"]
    code, checks = doctor(
        capsys, "--role", "expert", "--expert", "0", "--deployment", str(copy / "deployment.toml")
    )
    assert code == 0, checks  # expert 0 alone is intact


def test_a_named_data_folder_must_hold_a_dataset(env, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DDM_DATA_DIR", str(tmp_path))
    code, checks = doctor(capsys, "--role", "router", "--deployment", "nowhere.toml")
    assert (
        checks["data folder"]["status"] == "FAIL" and "ddm data fetch mnist" in checks["data folder"]["fix"]
    )
    assert checks["deployment file"]["status"] == "FAIL"
    needs_shared_mnist()
    code, checks = doctor(capsys, "--data-dir", str(SHARED), "--role", "client")
    assert checks["data folder"]["status"] == "ok" and "mnist test" in checks["data folder"]["detail"]
