"""Expert training on the tiny preset, both frameworks: files, determinism, resume, batches, schedules.

A few steps at batch 4 on synthetic images; every run of a framework is made once per module.
"""

from __future__ import annotations

import _pickle
import contextlib
import csv
import json
import math
import pickle
from pathlib import Path

import jax
import numpy as np
import pytest
import torch
from flax import serialization
from flax.traverse_util import flatten_dict
from jax.experimental.compilation_cache import compilation_cache
from safetensors.numpy import load_file

from ddm.schema.errors import ConfigError
from ddm.schema.flow import NULL_CLASS
from ddm.workers import checkpoint as ckpt
from ddm.workers.config import PRESETS
from ddm.workers.frameworks import FRAMEWORKS
from ddm.workers.jax_expert import checkpoint as jax_checkpoint
from ddm.workers.jax_expert.train import JaxTrainer
from ddm.workers.torch_expert import checkpoint as torch_checkpoint
from ddm.workers.torch_expert.train import TorchTrainer
from ddm.workers.torch_expert.unet import UNet as TorchUNet
from ddm.workers.training import TrainConfig, ema_decay, learning_rate, train_loop, training_batch

TINY = PRESETS["tiny"]
STEPS = 4
TCFG = TrainConfig(preset="tiny", steps=STEPS, batch=4, lr=1e-3, warmup=2, save_every=2, seed=0)
TRAINERS = {"torch": TorchTrainer, "jax": JaxTrainer}
LOAD_WEIGHTS = {"torch": torch_checkpoint.load_weights, "jax": jax_checkpoint.load_weights}
# identical for torch; XLA may reorder float sums between compilations
DETERMINISM_ATOL = {"torch": 0.0, "jax": 1e-6}
RESUME_ATOL = 1e-5


def synthetic(n: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    images = rng.uniform(-1, 1, (n, 1, 32, 32)).astype(np.float32)
    labels = (np.arange(n) % 10).astype(np.int64)
    return images, labels


def make_trainer(framework: str, tcfg: TrainConfig = TCFG):
    return TRAINERS[framework](TINY, tcfg)


def train(framework: str, out: Path, trainer=None, tcfg: TrainConfig = TCFG) -> dict:
    images, labels = synthetic()
    meta = {"framework": framework, "preset": "tiny", "config": TINY.to_dict()}
    trainer = trainer if trainer is not None else make_trainer(framework, tcfg)
    return train_loop(trainer, images, labels, tcfg, out, meta, progress=False)


def read_losses(folder: Path) -> list[tuple[int, float]]:
    with open(folder / "loss.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "loss", "lr", "wall_s"]
    return [(int(r[0]), float(r[1])) for r in rows[1:]]


def train_state(framework: str, folder: Path) -> dict[str, np.ndarray]:
    """Everything in train_state.* (raw and EMA weights, optimizer moments, step) as flat numpy arrays."""
    path = folder / FRAMEWORKS[framework].train_state_file
    if framework == "torch":
        return dict(load_file(str(path)))
    tree = serialization.msgpack_restore(path.read_bytes())
    tree.pop("wall_s")  # wall time is not part of the result
    return {k: np.asarray(v) for k, v in flatten_dict(tree, sep=".").items()}


def assert_same_arrays(a: dict, b: dict, atol: float) -> None:
    assert set(a) == set(b)
    for name in a:
        np.testing.assert_allclose(np.asarray(b[name]), np.asarray(a[name]), rtol=0, atol=atol, err_msg=name)


@contextlib.contextmanager
def no_unpickling():
    """Every way into the unpickler we can reach raises while this is active."""

    def refuse(*args, **kwargs):
        raise AssertionError("a checkpoint load tried to unpickle")

    with pytest.MonkeyPatch.context() as mp:
        for module in (pickle, _pickle):
            for name in ("load", "loads", "Unpickler"):
                mp.setattr(module, name, refuse)
        mp.setattr(torch, "load", refuse)
        yield


class SimulatedCrashError(Exception):
    pass


class CrashAt:
    """Wraps a trainer; its step number `at` (0-based) raises, as a killed process would stop."""

    def __init__(self, inner, at: int):
        self.inner, self.at, self.calls = inner, at, 0

    def resume(self, out_dir):
        return self.inner.resume(out_dir)

    def save(self, out_dir, step, wall_s):
        self.inner.save(out_dir, step, wall_s)

    def step(self, *args):
        if self.calls == self.at:
            raise SimulatedCrashError
        self.calls += 1
        return self.inner.step(*args)


@pytest.fixture(scope="module")
def jax_compile_cache(tmp_path_factory):
    """Each JaxTrainer jits its own step function (about 15 s to compile on a busy CPU); a persistent
    compilation cache lets the later trainers reuse the first one's executable: the session's
    (tests/conftest.py), else one for this module."""
    previous = jax.config.jax_compilation_cache_dir
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", previous or str(tmp_path_factory.mktemp("jax_cache")))
    yield
    jax.config.update("jax_compilation_cache_dir", previous)
    compilation_cache.reset_cache()


@pytest.fixture(scope="module", params=["torch", "jax"])
def runs(request, tmp_path_factory, jax_compile_cache):
    """Three runs of one framework, same seed: straight twice, and crashed after step 2 then resumed."""
    framework = request.param
    root = tmp_path_factory.mktemp(f"train_{framework}")
    a, b, split = root / "a", root / "b", root / "split"
    train(framework, a)
    train(framework, b)
    with pytest.raises(SimulatedCrashError):
        train(framework, split, trainer=CrashAt(make_trainer(framework), at=2))
    crashed = {
        "meta": json.loads((split / "meta.json").read_text()),
        "losses": read_losses(split),
    }
    with no_unpickling():  # resuming reads train_state.*: never through pickle
        train(framework, split)
    return {"framework": framework, "a": a, "b": b, "split": split, "crashed": crashed}


def test_files_written_and_loss_finite(runs):
    framework, folder = runs["framework"], runs["a"]
    names = {p.name for p in folder.iterdir()}
    record = FRAMEWORKS[framework]
    assert names == {"meta.json", "loss.csv", record.weights_file, record.train_state_file}
    meta = ckpt.read_meta(folder)
    assert meta["framework"] == framework
    assert meta["steps"] == STEPS
    assert meta["batch"] == TCFG.batch
    assert meta["num_train_samples"] == 16
    assert meta["train"] == TCFG.to_dict()
    assert ckpt.config_of(meta) == TINY
    assert math.isfinite(meta["final_loss"]) and meta["final_loss"] > 0
    losses = read_losses(folder)
    assert [s for s, _ in losses] == list(range(1, STEPS + 1))
    assert all(math.isfinite(loss) and loss > 0 for _, loss in losses)
    np.testing.assert_allclose(meta["final_loss"], np.mean([loss for _, loss in losses]), atol=1e-5)


def test_weights_are_the_canonical_layout_and_trained(runs):
    weights = LOAD_WEIGHTS[runs["framework"]](runs["a"])
    model = TorchUNet(TINY)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()}, strict=True)
    assert all(v.dtype == np.float32 for v in weights.values())
    # out_conv starts at zero in both frameworks: after a few steps the (EMA) weights have moved
    assert np.abs(weights["out_conv.weight"]).max() > 0


def test_same_seed_gives_the_same_run(runs):
    framework, a, b = runs["framework"], runs["a"], runs["b"]
    atol = DETERMINISM_ATOL[framework]
    la, lb = read_losses(a), read_losses(b)
    assert [s for s, _ in la] == [s for s, _ in lb]
    np.testing.assert_allclose([x for _, x in lb], [x for _, x in la], rtol=0, atol=atol + 1e-6 * bool(atol))
    assert_same_arrays(LOAD_WEIGHTS[framework](a), LOAD_WEIGHTS[framework](b), atol)
    assert_same_arrays(train_state(framework, a), train_state(framework, b), atol)


def test_crash_leaves_the_last_checkpoint(runs):
    crashed = runs["crashed"]
    assert crashed["meta"]["steps"] == 2  # save_every=2: checkpoint at step 2, crash in step 3
    assert [s for s, _ in crashed["losses"]] == [1, 2]


def test_resume_matches_the_straight_run(runs):
    framework, a, split = runs["framework"], runs["a"], runs["split"]
    la, ls = read_losses(a), read_losses(split)
    assert [s for s, _ in ls] == list(range(1, STEPS + 1))  # appended, not restarted, no duplicates
    np.testing.assert_allclose([x for _, x in ls], [x for _, x in la], rtol=0, atol=2e-6)
    assert_same_arrays(LOAD_WEIGHTS[framework](a), LOAD_WEIGHTS[framework](split), RESUME_ATOL)
    assert_same_arrays(train_state(framework, a), train_state(framework, split), RESUME_ATOL)
    assert json.loads((split / "meta.json").read_text())["steps"] == STEPS


def test_finished_run_is_not_trained_again(runs):
    framework, folder = runs["framework"], runs["a"]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    meta = train(framework, folder)
    assert meta["steps"] == STEPS
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_checkpoints_load_without_unpickling(runs, tmp_path):
    framework, folder = runs["framework"], runs["a"]
    with no_unpickling():
        with pytest.raises(AssertionError, match="unpickle"):  # the guard is live
            pickle.loads(pickle.dumps(1))
        weights = LOAD_WEIGHTS[framework](folder)
        trainer = make_trainer(framework)
        step, wall_s = trainer.resume(folder)
    assert step == STEPS and wall_s >= 0
    assert weights["in_conv.weight"].shape == (TINY.base_channels, 1, 3, 3)


def test_both_checkpoint_kinds_load_without_unpickling(tmp_path):
    """Written by the savers directly (no training), read back by both load_weights under the guard."""
    sd = {k: v.detach().numpy().copy() for k, v in TorchUNet(TINY).state_dict().items()}
    torch_dir, jax_dir = tmp_path / "torch", tmp_path / "jax"
    torch_dir.mkdir()
    jax_dir.mkdir()
    torch_checkpoint.save_weights(torch_dir, sd)
    like = {}
    for name, arr in sd.items():  # a Flax-shaped template from the canonical names (no Flax init)
        module, _, leaf = name.rpartition(".")
        node = like
        for part in module.split("."):
            node = node.setdefault(part, {})
        if leaf == "bias":
            node["bias"] = arr
        elif "norm" in module:
            node["scale"] = arr
        elif module == "class_emb":
            node["embedding"] = arr
        elif arr.ndim == 4:
            node["kernel"] = arr.transpose(2, 3, 1, 0)
        else:
            node["kernel"] = arr.T
    jax_checkpoint.save_weights(jax_dir, sd, like)
    with no_unpickling():
        from_torch = torch_checkpoint.load_weights(torch_dir)
        from_jax = jax_checkpoint.load_weights(jax_dir)
    assert_same_arrays(sd, from_torch, 0.0)
    assert_same_arrays(sd, from_jax, 0.0)


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_ema_weight_follows_the_decay(framework, jax_compile_cache):
    """ema=0 copies the new weights; ema=1 keeps the old EMA."""
    images, labels = synthetic()
    batch = training_batch(images, labels, TCFG, 0)
    trainer = make_trainer(framework)

    def snapshot():
        if framework == "torch":
            return (
                torch_checkpoint.state_to_numpy(trainer.model),
                torch_checkpoint.state_to_numpy(trainer.ema),
            )
        host = jax.device_get({k: trainer.state[k] for k in ("params", "ema")})
        return flatten_dict(host["params"], sep="."), flatten_dict(host["ema"], sep=".")

    _, ema0 = snapshot()
    trainer.step(*batch, 1e-3, 1.0)
    raw1, ema1 = snapshot()
    assert_same_arrays(ema0, ema1, 0.0)
    assert any(np.abs(raw1[k] - ema0[k]).max() > 0 for k in raw1)  # the raw weights did move
    trainer.step(*batch, 1e-3, 0.0)
    raw2, ema2 = snapshot()
    assert_same_arrays(raw2, ema2, 0.0)


# ---- the framework-free half: batches and schedules ----


def test_training_batch_shapes_and_dtypes():
    images, labels = synthetic()
    x_t, t, y, v = training_batch(images, labels, TCFG, 0)
    assert x_t.shape == v.shape == (TCFG.batch, 1, 32, 32)
    assert x_t.dtype == v.dtype == t.dtype == np.float32
    assert t.shape == y.shape == (TCFG.batch,)
    assert y.dtype == np.int64
    assert np.all((t >= 0) & (t < 1))


def test_training_batch_is_a_pure_function_of_seed_and_step():
    images, labels = synthetic()
    np.random.seed(1)
    first = training_batch(images, labels, TCFG, 5)
    training_batch(images, labels, TCFG, 3)  # other calls in between change nothing
    np.random.seed(2)
    torch.manual_seed(3)
    again = training_batch(images, labels, TCFG, 5)
    for u, w in zip(first, again, strict=True):
        np.testing.assert_array_equal(u, w)
    other_step = training_batch(images, labels, TCFG, 6)
    other_seed = training_batch(images, labels, TrainConfig(**{**TCFG.to_dict(), "seed": 1}), 5)
    assert not np.array_equal(first[0], other_step[0])
    assert not np.array_equal(first[0], other_seed[0])


def test_training_batch_follows_the_flow_convention():
    """x_t + (1 - t) v recovers a data image x1, and y is that image's label (or the null class)."""
    images, labels = synthetic()
    cfg = TrainConfig(preset="tiny", batch=64, label_dropout=0.3, seed=7)
    x_t, t, y, v = training_batch(images, labels, cfg, 11)
    x1 = x_t + (1 - t)[:, None, None, None] * v
    dist = np.abs(x1[:, None] - images[None]).reshape(len(x1), len(images), -1).max(axis=2)
    idx = dist.argmin(axis=1)
    assert np.all(dist[np.arange(len(x1)), idx] < 1e-5)
    kept = y != NULL_CLASS
    assert kept.any() and (~kept).any()
    np.testing.assert_array_equal(y[kept], labels[idx[kept]])
    x0 = x1 - v  # the noise: standard normal
    assert abs(float(x0.mean())) < 0.05 and abs(float(x0.std()) - 1) < 0.05


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.25])
def test_label_dropout_rate(rate):
    images, labels = synthetic()
    cfg = TrainConfig(preset="tiny", batch=2048, label_dropout=rate)
    ys = np.concatenate([training_batch(images, labels, cfg, s)[2] for s in range(4)])
    frac = float(np.mean(ys == NULL_CLASS))
    if rate == 0.0:
        assert frac == 0.0
    else:
        assert abs(frac - rate) < 0.02, frac  # 8192 draws: sd < 0.005


def test_train_config_validation():
    with pytest.raises(ConfigError, match="steps >= 1"):
        TrainConfig(steps=0)
    with pytest.raises(ConfigError, match="batch >= 1"):
        TrainConfig(batch=0)
    with pytest.raises(ConfigError, match="label_dropout"):
        TrainConfig(label_dropout=1.0)


def test_learning_rate_warmup_and_cosine_endpoints():
    cfg = TrainConfig(steps=100, warmup=10, lr=1e-3, min_lr_ratio=0.1)
    assert learning_rate(0, cfg) == pytest.approx(1e-4)
    assert learning_rate(9, cfg) == pytest.approx(1e-3)
    assert learning_rate(10, cfg) == pytest.approx(1e-3)  # cosine starts at the peak
    assert learning_rate(55, cfg) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # half way
    assert learning_rate(100, cfg) == pytest.approx(1e-4)  # ends at lr * min_lr_ratio
    assert learning_rate(10_000, cfg) == pytest.approx(1e-4)  # and stays there
    lrs = [learning_rate(s, cfg) for s in range(101)]
    assert all(x < y for x, y in zip(lrs[:9], lrs[1:10], strict=True))  # rising to the peak at step 9
    assert all(x >= y for x, y in zip(lrs[10:], lrs[11:], strict=False))
    no_warmup = TrainConfig(steps=10, warmup=0, lr=2e-3)
    assert learning_rate(0, no_warmup) == pytest.approx(2e-3)


def test_ema_decay_warm_up():
    cfg = TrainConfig(ema_decay=0.999)
    assert ema_decay(0, cfg) == pytest.approx(0.1)
    assert ema_decay(1, cfg) == pytest.approx(2 / 11)
    decays = [ema_decay(s, cfg) for s in range(0, 20_000, 7)]
    assert all(x <= y for x, y in zip(decays, decays[1:], strict=False))
    assert ema_decay(8_980, cfg) < 0.999  # (1 + s) / (10 + s) reaches 0.999 at s = 8990
    assert ema_decay(9_000, cfg) == 0.999
    assert ema_decay(10**7, cfg) == 0.999
    assert ema_decay(10**7, TrainConfig(ema_decay=0.9)) == 0.9
