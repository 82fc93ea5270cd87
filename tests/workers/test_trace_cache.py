"""The trace cache (workers/torch_expert/trace_cache.py) through the `cpu-traced` stand-in: compile once,
load at the next start, never serve a file under the wrong key, compile again what is damaged; and the
traced buckets compute what the eager CPU model computes, padding and guidance included.

Tiny random-weight checkpoints, buckets (1, 2, 4): a load compiles in well under a second.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.errors import ConfigError
from ddm.workers.checkpoint import read_meta
from ddm.workers.frameworks import TORCH
from ddm.workers.selftest import fixed_inputs
from ddm.workers.torch_expert.expert import load
from ddm.workers.torch_expert.trace_cache import TraceCache, TraceKey
from tests.support.checkpoints import good_and_perturbed

BUCKETS = (1, 2, 4)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    """(a tiny random torch expert, the same with one tensor perturbed)."""
    return good_and_perturbed(tmp_path_factory.mktemp("trace_cache"))


@pytest.fixture(autouse=True)
def no_default_cache(monkeypatch, tmp_path):
    """A load that falls back to the settings' folder writes under this test's tmp_path, never ~."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DDM_TRACE_CACHE_DIR", raising=False)


def load_traced(path: Path, cache: TraceCache | None, buckets=BUCKETS):
    return load(path, read_meta(path), "cpu-traced", buckets, "fp32", cache)


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def bucket_files(folder: Path, bucket: int) -> tuple[Path, Path]:
    """The .pt and its .json sidecar of one bucket (exactly one pair in `folder`)."""
    (model,) = folder.glob(f"bucket{bucket}-*.pt")
    return model, model.with_suffix(".json")


def outputs(expert) -> dict[int, np.ndarray]:
    return {b: expert._forward(*fixed_inputs(b)) for b in BUCKETS}


# ---------------------------------------------------------------- compile once, load at the next start


def test_first_load_compiles_every_bucket_and_saves_each_with_its_record(checkpoints, tmp_path):
    good, _ = checkpoints
    cache = TraceCache(tmp_path / "traced")
    expert = load_traced(good, cache)
    assert expert.buckets == BUCKETS
    assert (cache.compiled, cache.loaded) == (len(BUCKETS), 0)
    assert expert.compile_report["compiled"] == len(BUCKETS) and expert.compile_report["loaded"] == 0
    assert expert.compile_report["compile_s"] > 0
    names = files(cache.folder)
    assert len(names) == 2 * len(BUCKETS), names  # a .pt and a .json per bucket, no temporary left over
    weights_sha = file_sha256(good / TORCH.weights_file)
    for b in BUCKETS:
        model, sidecar = bucket_files(cache.folder, b)
        record = json.loads(sidecar.read_text())
        assert record["sha256"] == file_sha256(model)
        assert record["key"]["bucket"] == b and record["key"]["device"] == "cpu-traced"
        assert record["key"]["weights_sha256"] == weights_sha
        assert record["key"]["toolchain"]["torch"] == torch.__version__
        assert record["key"]["compiler_args"] == ["torch.jit.trace"]


def test_second_load_compiles_nothing_and_computes_the_same(checkpoints, tmp_path):
    good, _ = checkpoints
    folder = tmp_path / "traced"
    first = load_traced(good, TraceCache(folder))
    before = {name: (folder / name).stat().st_mtime_ns for name in files(folder)}
    cache = TraceCache(folder)  # a restart: a new cache object over the same folder
    second = load_traced(good, cache)
    assert (cache.compiled, cache.loaded) == (0, len(BUCKETS))
    assert second.compile_report == {"compiled": 0, "loaded": len(BUCKETS), "compile_s": 0.0}
    assert {name: (folder / name).stat().st_mtime_ns for name in files(folder)} == before  # read only
    want, got = outputs(first), outputs(second)
    for b in BUCKETS:
        assert np.array_equal(got[b], want[b]), f"bucket {b}"
    x, t, y = fixed_inputs(3)
    assert np.array_equal(second.velocity(x, t, y, 2.0), first.velocity(x, t, y, 2.0))


def test_other_weights_miss_the_cache(checkpoints, tmp_path):
    good, perturbed = checkpoints
    folder = tmp_path / "traced"
    first = load_traced(good, TraceCache(folder))
    cache = TraceCache(folder)
    other = load_traced(perturbed, cache)
    assert (cache.compiled, cache.loaded) == (len(BUCKETS), 0)
    assert len(files(folder)) == 4 * len(BUCKETS)  # its own files beside the first checkpoint's
    x, t, y = fixed_inputs(4)
    want = first._forward(x, t, y)
    scale = float(np.sqrt(np.mean(want.astype(np.float64) ** 2)))
    assert np.abs(other._forward(x, t, y) - want).max() > 0.5 * scale  # not the stale module
    again = TraceCache(folder)
    load_traced(good, again)  # the first checkpoint's files are still there and still used
    assert (again.compiled, again.loaded) == (0, len(BUCKETS))


# ---------------------------------------------------------------- the key: anything changed is another file


def tiny_module() -> torch.jit.ScriptModule:
    return torch.jit.trace(torch.nn.Linear(2, 2), torch.zeros(1, 2), check_trace=False)


KEY = TraceKey(
    "ab" * 32, "unet-config", 4, "neuron", (("neuronx-cc", "2.21"), ("torch", "2.9.0")), ("--auto-cast=none",)
)


@pytest.mark.parametrize(
    "change",
    [
        {"weights_sha256": "cd" * 32},
        {"model": "another-unet-config"},
        {"bucket": 8},
        {"device": "cpu-traced"},
        {"toolchain": (("neuronx-cc", "2.22"), ("torch", "2.9.0"))},
        {"toolchain": (("neuronx-cc", "2.21"), ("torch", "2.9.1"))},
        {"compiler_args": ("--auto-cast=matmult", "--auto-cast-type=tf32")},
        {"compiler_args": ("--model-type=unet-inference", "--auto-cast=none")},
    ],
    ids=lambda change: next(iter(change)),
)
def test_a_key_that_differs_in_anything_is_another_file(tmp_path, change):
    other = dataclasses.replace(KEY, **change)
    assert other.digest() != KEY.digest()
    cache = TraceCache(tmp_path)
    compiles = []

    def compile_fn():
        compiles.append(1)
        return tiny_module()

    cache.get(KEY, compile_fn)
    cache.get(other, compile_fn)
    assert len(compiles) == 2 and len(list(tmp_path.glob("*.pt"))) == 2
    cache.get(KEY, compile_fn)
    cache.get(other, compile_fn)
    assert len(compiles) == 2 and (cache.compiled, cache.loaded) == (2, 2)


def test_the_digest_does_not_depend_on_the_object():
    same = TraceKey(
        KEY.weights_sha256, KEY.model, 4, "neuron", tuple(KEY.toolchain), tuple(KEY.compiler_args)
    )
    assert same.digest() == KEY.digest() and len(KEY.digest()) == 32


# ---------------------------------------------------------------- damaged files are compiled again


def damage_truncate(model: Path, sidecar: Path) -> None:
    data = model.read_bytes()
    model.write_bytes(data[: len(data) // 2])


def damage_sidecar_sha(model: Path, sidecar: Path) -> None:
    record = json.loads(sidecar.read_text())
    record["sha256"] = "0" * 64
    sidecar.write_text(json.dumps(record))


def damage_sidecar_garbage(model: Path, sidecar: Path) -> None:
    sidecar.write_text("{not json")


def damage_model_garbage(model: Path, sidecar: Path) -> None:
    """A file whose record agrees with it but that torch.jit.load cannot read."""
    model.write_bytes(b"not a torchscript archive")
    record = json.loads(sidecar.read_text())
    record["sha256"] = file_sha256(model)
    sidecar.write_text(json.dumps(record))


def damage_sidecar_missing(model: Path, sidecar: Path) -> None:
    sidecar.unlink()


@pytest.mark.parametrize(
    "damage",
    [
        damage_truncate,
        damage_sidecar_sha,
        damage_sidecar_garbage,
        damage_model_garbage,
        damage_sidecar_missing,
    ],
    ids=lambda f: f.__name__.removeprefix("damage_"),
)
def test_a_damaged_bucket_is_compiled_again_and_repaired(checkpoints, tmp_path, damage, caplog):
    good, _ = checkpoints
    folder = tmp_path / "traced"
    want = outputs(load_traced(good, TraceCache(folder)))
    model, sidecar = bucket_files(folder, 2)
    damage(model, sidecar)
    cache = TraceCache(folder)
    expert = load_traced(good, cache)
    assert (cache.compiled, cache.loaded) == (1, len(BUCKETS) - 1)  # bucket 2 only
    if damage is not damage_sidecar_missing:  # a file without a record is simply not there
        assert "traced bucket 2" in caplog.text and "compiling again" in caplog.text
    got = outputs(expert)
    for b in BUCKETS:
        assert np.array_equal(got[b], want[b]), f"bucket {b}"
    model, sidecar = bucket_files(folder, 2)  # repaired: the record names the file again
    assert json.loads(sidecar.read_text())["sha256"] == file_sha256(model)
    assert len(files(folder)) == 2 * len(BUCKETS)
    after = TraceCache(folder)
    load_traced(good, after)
    assert (after.compiled, after.loaded) == (0, len(BUCKETS))


def test_a_swapped_file_is_not_served_under_another_bucket(checkpoints, tmp_path):
    """Bucket 1's file and record copied over bucket 2's: the record's key is not bucket 2's."""
    good, _ = checkpoints
    folder = tmp_path / "traced"
    load_traced(good, TraceCache(folder))
    model1, sidecar1 = bucket_files(folder, 1)
    model2, sidecar2 = bucket_files(folder, 2)
    shutil.copyfile(model1, model2)
    shutil.copyfile(sidecar1, sidecar2)
    cache = TraceCache(folder)
    expert = load_traced(good, cache)
    assert (cache.compiled, cache.loaded) == (1, len(BUCKETS) - 1)
    assert expert._forward(*fixed_inputs(2)).shape == (2, 1, 32, 32)
    assert json.loads(sidecar2.read_text())["key"]["bucket"] == 2


def test_a_sidecar_that_is_not_a_json_object_is_compiled_again(checkpoints, tmp_path):
    good, _ = checkpoints
    folder = tmp_path / "traced"
    load_traced(good, TraceCache(folder))
    _, sidecar = bucket_files(folder, 2)
    sidecar.write_text("[]")
    cache = TraceCache(folder)
    load_traced(good, cache)
    assert (cache.compiled, cache.loaded) == (1, len(BUCKETS) - 1)


def test_a_changed_model_config_misses_the_cache(checkpoints, tmp_path):
    good, _ = checkpoints
    folder = tmp_path / "traced"
    load_traced(good, TraceCache(folder))
    regrouped = shutil.copytree(good, tmp_path / "regrouped")
    meta = json.loads((regrouped / "meta.json").read_text())
    meta["config"]["groups"] = 4  # same tensors, other GroupNorm: other velocities
    (regrouped / "meta.json").write_text(json.dumps(meta))
    cache = TraceCache(folder)
    load_traced(regrouped, cache)
    assert cache.compiled == len(BUCKETS)


def test_an_unwritable_folder_costs_a_compile_not_the_load(checkpoints, tmp_path, caplog):
    good, _ = checkpoints
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # the cache folder cannot be created where a file is
    cache = TraceCache(blocker)
    expert = load_traced(good, cache)
    assert (cache.compiled, cache.loaded) == (len(BUCKETS), 0)
    assert expert._forward(*fixed_inputs(4)).shape == (4, 1, 32, 32)
    assert "could not save traced bucket" in caplog.text


# ---------------------------------------------------------------- DDM_TRACE_CACHE_DIR


@pytest.mark.parametrize("value", ["off", "OFF", "none", "0", ""])
def test_off_means_no_folder(monkeypatch, value):
    monkeypatch.setenv("DDM_TRACE_CACHE_DIR", value)
    assert TraceCache.from_settings().folder is None


def test_off_writes_no_files_and_compiles_at_every_start(checkpoints, tmp_path, monkeypatch):
    good, _ = checkpoints
    monkeypatch.setenv("DDM_TRACE_CACHE_DIR", "off")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for _ in range(2):
        expert = load_traced(good, None)
        assert expert.compile_report["compiled"] == len(BUCKETS) and expert.compile_report["loaded"] == 0
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # not even the default ~/.cache/ddm
    assert not (tmp_path / "home").exists()


def test_the_setting_names_the_folder_a_load_uses(checkpoints, tmp_path, monkeypatch):
    good, _ = checkpoints
    monkeypatch.setenv("DDM_TRACE_CACHE_DIR", str(tmp_path / "from-env"))
    assert load_traced(good, None).compile_report["compiled"] == len(BUCKETS)
    assert len(files(tmp_path / "from-env")) == 2 * len(BUCKETS)
    assert load_traced(good, None).compile_report == {"compiled": 0, "loaded": 3, "compile_s": 0.0}


def test_the_default_folder_is_under_home(checkpoints, tmp_path):
    good, _ = checkpoints
    load_traced(good, None)
    assert len(files(tmp_path / "home" / ".cache" / "ddm" / "traced")) == 2 * len(BUCKETS)


# ---------------------------------------------------------------- cpu-traced computes what eager computes


@pytest.fixture(scope="module")
def eager_and_traced(checkpoints, tmp_path_factory):
    good, _ = checkpoints
    eager = load(good, read_meta(good), "cpu", BUCKETS, "fp32")
    traced = load_traced(good, TraceCache(tmp_path_factory.mktemp("traced")))
    return eager, traced


def close(got: np.ndarray, want: np.ndarray) -> None:
    """Equal up to float32 summation order (batch-size-dependent kernels): 1e-5 of the velocity scale."""
    scale = float(np.sqrt(np.mean(want.astype(np.float64) ** 2)))
    assert scale > 1e-4  # random weights give small but real velocities, not zeros anything would match
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("bucket", BUCKETS)
def test_each_traced_bucket_equals_the_eager_model(eager_and_traced, bucket):
    eager, traced = eager_and_traced
    assert eager.buckets is None and traced.buckets == BUCKETS
    x, t, y = fixed_inputs(bucket)
    close(traced._forward(x, t, y), eager._forward(x, t, y))


@pytest.mark.parametrize(
    ("rows", "guidance"),
    [
        (3, 1.0),  # 3 rows padded into bucket 4
        (3, 2.5),  # 3 + 3 null-class rows: chunks of 4 and 2
        (3, [1.0, 3.0, 1.0]),  # 3 + 1 null row: exactly bucket 4
        (1, 0.0),  # guidance 0: the unconditional velocity
        (2, 4.0),  # 2 + 2: bucket 4
        (7, [1.5, 1.0, 2.0, 1.0, 0.5, 1.0, 1.0]),  # 10 rows: 4 + 4 + 2
    ],
)
def test_velocity_through_the_buckets_equals_eager(eager_and_traced, rows, guidance):
    eager, traced = eager_and_traced
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 1, 32, 32), dtype=np.float32)
    t = rng.uniform(0, 1, rows).astype(np.float32)
    y = rng.integers(0, 10, rows)
    got = traced.velocity(x, t, y, guidance)
    assert got.shape == (rows, 1, 32, 32) and got.dtype == np.float32
    close(got, eager.velocity(x, t, y, guidance))


def test_guidance_changes_the_traced_velocity(eager_and_traced):
    """The guided rows really take the null-class path (else the tests above compare v_y with v_y)."""
    _, traced = eager_and_traced
    x, t, y = fixed_inputs(3)
    y = np.array([1, 2, 3])
    plain = traced.velocity(x, t, y, 1.0)
    scale = float(np.sqrt(np.mean(plain.astype(np.float64) ** 2)))
    assert np.abs(traced.velocity(x, t, y, 3.0) - plain).max() > 0.1 * scale


def test_cpu_traced_is_fp32_only(checkpoints, tmp_path):
    good, _ = checkpoints
    for precision in ("bf16", "tf32"):
        with pytest.raises(ConfigError, match=rf"precision {precision} is not available on cpu-traced.*fp32"):
            load(good, read_meta(good), "cpu-traced", BUCKETS, precision, TraceCache(tmp_path))
    assert files(tmp_path) == []  # refused before anything was compiled
