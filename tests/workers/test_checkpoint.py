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


def _moved_weights(tmp_path, framework: str, weights: str):
    """A random expert whose weights file moved to tmp_path/elsewhere, its meta naming it by `weights`
    (a path relative to the folder, or absolute)."""
    import json
    import shutil

    from ddm.ops.random_experts import make_random_expert
    from ddm.workers.frameworks import expert_framework

    folder = make_random_expert(tmp_path / "expert", framework, range(10), seed=3)
    name = expert_framework(framework).weights_file
    (tmp_path / "elsewhere").mkdir()
    shutil.copyfile(folder / name, tmp_path / "elsewhere" / name)
    served = tmp_path / "served"
    served.mkdir()
    meta = json.loads((folder / "meta.json").read_text())
    write_meta(served, {**meta, "weights": weights.format(root=tmp_path, name=name)})
    return folder, served


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.parametrize("weights", ["../elsewhere/{name}", "{root}/elsewhere/{name}"])
def test_meta_names_its_weights_file_elsewhere(tmp_path, framework, weights):
    """meta.json "weights" (relative to the folder or absolute): the expert serves that file in place,
    and answers as the folder it came from."""
    import numpy as np

    from ddm.workers import load_expert

    folder, served = _moved_weights(tmp_path, framework, weights)
    assert not (served / expert_framework_file(framework)).exists()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 1, 32, 32)).astype(np.float32)
    t, y = np.array([0.1, 0.5, 0.9], np.float32), np.array([0, 3, 10])
    want = load_expert(folder, "cpu").velocity(x, t, y, 2.0)
    assert np.array_equal(load_expert(served, "cpu").velocity(x, t, y, 2.0), want)


def expert_framework_file(framework: str) -> str:
    from ddm.workers.frameworks import expert_framework

    return expert_framework(framework).weights_file


def test_weights_elsewhere_need_their_digest_and_must_match_it(tmp_path):
    import json

    from ddm.workers import load_expert

    _, served = _moved_weights(tmp_path, "torch", "../elsewhere/{name}")
    meta = json.loads((served / "meta.json").read_text())
    write_meta(served, {**meta, "card": {**meta["card"], "weights_sha256": None}})
    with pytest.raises(ConfigError, match="weights_sha256"):
        read_meta(served)
    write_meta(served, meta)
    (tmp_path / "elsewhere" / TORCH.weights_file).write_bytes(b"other")
    with pytest.raises(ConfigError, match="sha256"):
        load_expert(served, "cpu")
    write_meta(served, {**meta, "weights": "../nowhere/model.safetensors"})
    with pytest.raises(ConfigError, match="model.safetensors in .*nowhere"):
        read_meta(served)
    write_meta(served, {**meta, "weights": ""})
    with pytest.raises(ConfigError, match='"weights" a file path'):
        read_meta(served)
