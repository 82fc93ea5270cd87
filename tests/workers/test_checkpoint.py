"""Expert checkpoint folders (workers/checkpoint.py): the expert's meta, its checks, and resuming."""

from __future__ import annotations

import pytest

from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError
from ddm.workers.checkpoint import check_resume, expert_meta, read_meta
from ddm.workers.config import get_preset
from ddm.workers.frameworks import TORCH

PARTITION = {"id": "abc123", "dataset": "mnist", "split": "test[:8000]", "method": "labels"}
COUNTS = [10, 20, 0, 5, 0, 0, 0, 0, 0, 1]


def meta(preset: str = "tiny", framework: str = "torch") -> dict:
    return expert_meta(framework, preset, 1, PARTITION, COUNTS, "cpu")


def test_expert_meta_records_what_training_starts_from():
    m = meta()
    assert m["kind"] == "expert" and m["framework"] == "torch" and m["expert"] == 1
    assert m["classes"] == [0, 1, 3, 9] and m["label_counts"] == COUNTS
    assert m["partition"] == PARTITION and m["config"] == get_preset("tiny").to_dict()


def test_read_meta_wants_an_expert_with_its_weights(tmp_path):
    write_meta(tmp_path, meta())
    with pytest.raises(ConfigError, match="model.safetensors"):
        read_meta(tmp_path)
    (tmp_path / TORCH.weights_file).write_bytes(b"")
    assert read_meta(tmp_path)["expert"] == 1
    write_meta(tmp_path, {"kind": "router", "framework": "jax", "config": {}, "partition": {}})
    with pytest.raises(ConfigError, match="kind = expert"):
        read_meta(tmp_path)


def test_check_resume(tmp_path):
    out = tmp_path / "run"
    check_resume(out, meta(), resume=False)  # a new run
    write_meta(out, meta())
    (out / TORCH.train_state_file).write_bytes(b"")
    with pytest.raises(ConfigError, match="pass --resume"):
        check_resume(out, meta(), resume=False)
    check_resume(out, meta(), resume=True)
    with pytest.raises(ConfigError, match="same preset"):
        check_resume(out, meta(preset="small"), resume=True)
    with pytest.raises(ConfigError, match="a jax train state"):
        check_resume(out, meta(framework="jax"), resume=True)
