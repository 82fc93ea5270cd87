"""Expert cards end to end: training with a DDPM objective writes one (both frameworks, tiny preset, one
step), load_expert reads it and answers in the deployment's velocity; old checkpoints get the LEGACY
card and are served bit for bit as before; a card that does not fit its weights or its model is
refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ddm.schema.checkpoint_meta import file_sha256, write_meta
from ddm.schema.errors import ConfigError
from ddm.schema.expert_card import ExpertCard, Objective, Schedule, card_of
from ddm.schema.flow import guided_velocity
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers import load_expert
from ddm.workers.checkpoint import check_resume, expert_meta, read_meta
from ddm.workers.frameworks import FRAMEWORKS
from ddm.workers.training import TrainConfig, make_trainer, train_loop, training_batch

ROOT = Path(__file__).resolve().parents[2]
PARTITION = {"id": "cards", "dataset": "synthetic", "split": "none", "method": "labels"}
COUNTS = [4] * 10
EPS = Objective("ddpm-eps", Schedule.make("cosine"), "t0-data")
TCFG = TrainConfig(
    preset="tiny", steps=1, batch=4, warmup=1, save_every=1, objective="ddpm-eps", schedule="cosine",
    time_convention="t0-data",
)  # fmt: skip


def synthetic(n: int = 8):
    rng = np.random.default_rng(0)
    return rng.uniform(-1, 1, (n, 1, 32, 32)).astype(np.float32), (np.arange(n) % 10).astype(np.int64)


@pytest.fixture(scope="module", params=sorted(FRAMEWORKS))
def eps_expert(request, tmp_path_factory) -> tuple[str, Path, dict]:
    """A tiny expert trained one step on DDPM eps (cosine schedule, t0-data) in each framework."""
    framework = request.param
    out = tmp_path_factory.mktemp(f"eps_{framework}")
    images, labels = synthetic()
    meta = expert_meta(framework, "tiny", 0, PARTITION, COUNTS, "cpu", objective=EPS)
    final = train_loop(make_trainer(framework, TCFG), images, labels, TCFG, out, meta, progress=False)
    return framework, out, final


def test_training_an_eps_expert_writes_its_card(eps_expert):
    framework, out, final = eps_expert
    stored = json.loads((out / "meta.json").read_text())
    card = card_of(stored)
    assert card.objective == EPS and card.framework == framework and card.sample_space == LEGACY
    assert card.trained_on.steps == 1 and card.trained_on.label_counts == tuple(COUNTS)
    assert card.weights_sha256 == file_sha256(out / FRAMEWORKS[framework].weights_file)
    assert ExpertCard.from_dict(card.to_dict()) == card  # the record round-trips
    assert stored["train"]["objective"] == "ddpm-eps" and np.isfinite(final["final_loss"])


def test_an_eps_expert_answers_velocities_through_load_expert(eps_expert):
    framework, out, _ = eps_expert
    expert = load_expert(out, device="cpu", buckets=(4, 8))
    assert expert.card == card_of(read_meta(out)) and expert.card.objective == EPS
    assert expert.meta.card == expert.card
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 1, 32, 32)).astype(np.float32)
    t = np.array([0.0, 0.3, 0.7, 1.0], np.float32)
    v = expert.velocity(x, t, np.array([0, 3, 10, 9]), guidance=np.array([1.0, 2.0, 1.0, 1.5]))
    assert v.shape == x.shape and v.dtype == np.float32 and np.isfinite(v).all()


def test_the_eps_batch_is_the_objectives_regression():
    images, labels = synthetic()
    x, s, y, target = training_batch(images, labels, TCFG, 0)
    flow = training_batch(
        images,
        labels,
        TrainConfig(
            **{**TCFG.to_dict(), "objective": "flow-velocity", "schedule": "", "time_convention": "t0-noise"}
        ),
        0,
    )
    assert np.array_equal(y, flow[2])  # the same draws
    assert x.shape == target.shape == images[:4].shape and s.shape == (4,)
    assert not np.allclose(target, flow[3])


def test_unknown_objective_is_refused_naming_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"flow-velocity.*ddpm-eps.*ddpm-x0.*ddpm-v"):
        TrainConfig(objective="ddpm-score")
    with pytest.raises(ConfigError, match=r"linear.*cosine"):
        TrainConfig(objective="ddpm-eps", schedule="sigmoid")
    with pytest.raises(ConfigError, match=r"t0-noise.*t0-data"):
        TrainConfig(time_convention="t-half")


def test_a_card_with_an_unknown_objective_is_refused_at_load(eps_expert, tmp_path):
    framework, out, _ = eps_expert
    meta = json.loads((out / "meta.json").read_text())
    folder = tmp_path / "bad"
    folder.mkdir()
    weights = FRAMEWORKS[framework].weights_file
    (folder / weights).write_bytes((out / weights).read_bytes())
    write_meta(folder, {**meta, "card": {**meta["card"], "objective": "ddpm-score"}})
    with pytest.raises(
        ConfigError, match=r"objective in \['flow-velocity', 'ddpm-eps', 'ddpm-x0', 'ddpm-v'\]"
    ):
        load_expert(folder, device="cpu")
    write_meta(folder, {**meta, "card": {**meta["card"], "time_convention": "sideways"}})
    with pytest.raises(ConfigError, match="t0-noise"):
        load_expert(folder, device="cpu")


def test_weights_that_are_not_the_cards_are_refused(eps_expert, tmp_path):
    framework, out, _ = eps_expert
    folder = tmp_path / "swapped"
    folder.mkdir()
    weights = FRAMEWORKS[framework].weights_file
    (folder / weights).write_bytes((out / weights).read_bytes() + b" ")
    (folder / "meta.json").write_text((out / "meta.json").read_text())
    with pytest.raises(ConfigError, match="sha256"):
        load_expert(folder, device="cpu")


def test_resuming_with_another_objective_is_refused(eps_expert):
    framework, out, _ = eps_expert
    flow_meta = expert_meta(framework, "tiny", 0, PARTITION, COUNTS, "cpu")
    with pytest.raises(ConfigError, match="same objective"):
        check_resume(out, flow_meta, resume=True)


def test_a_card_that_does_not_fit_the_model_is_refused(tmp_path):
    rgb = SampleSpace((3, 32, 32), num_classes=10, class_names=tuple("abcdefghij"))
    meta = expert_meta("torch", "tiny", 0, PARTITION, COUNTS, sample_space=rgb)
    assert meta["config"]["in_channels"] == 3  # the builder sizes the model for its card
    write_meta(tmp_path, {**meta, "config": {**meta["config"], "in_channels": 1}})  # a hand-edited meta
    (tmp_path / FRAMEWORKS["torch"].weights_file).write_bytes(b"")
    with pytest.raises(ConfigError, match="in_channels 3"):
        read_meta(tmp_path)


# -- the shipped checkpoints: no card, the LEGACY one derived, served exactly as before -----------------


@pytest.mark.parametrize(
    "folder", ["checkpoints/mnist/expert0_torch", "checkpoints/fashion-mnist/expert0_torch"]
)
def test_shipped_checkpoints_get_the_legacy_card_and_the_same_bits(folder):
    meta = read_meta(ROOT / folder)
    assert "card" not in meta
    expert = load_expert(ROOT / folder, device="cpu")
    card = expert.card
    assert card.derived and card.objective.is_identity and card.sample_space == LEGACY
    assert card.weights_sha256 is None and card.trained_on.label_counts == tuple(meta["label_counts"])
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 1, 32, 32)).astype(np.float32)
    t = np.array([0.0, 0.5, 0.9], np.float32)
    y = np.array([1, 4, 10])
    g = np.array([1.0, 1.5, 1.5], np.float32)
    # what Expert.velocity computed before cards: the network on the rows plus null rows, then guidance
    raw = expert._run(np.concatenate([x, x[1:]]), np.concatenate([t, t[1:]]), np.array([1, 4, 10, 10, 10]))
    want = raw[:3].copy()
    want[1:] = guided_velocity(want[1:], raw[3:], g[1:])
    assert np.array_equal(expert.velocity(x, t, y, guidance=g), want)


RGB = SampleSpace((3, 16, 16), (-1.0, 1.0), 5, ("a", "b", "c", "d", "e"))


@pytest.mark.parametrize(("framework", "architecture"), [("torch", "unet"), ("jax", "dit")])
def test_training_in_an_rgb_space_sizes_the_model_for_it(framework, architecture, tmp_path):
    """The preset is sized for the card's space (channels, size, classes): the model trains on RGB and the
    checkpoint loads and answers RGB velocities (a 1-channel preset would refuse the batch)."""
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (4, 3, 16, 16)).astype(np.float32)
    labels = np.arange(4) % RGB.num_classes
    tcfg = TrainConfig(preset="tiny", steps=1, batch=4, warmup=1, save_every=1)
    meta = expert_meta(framework, "tiny", 0, PARTITION, [1] * 5, "cpu", architecture, sample_space=RGB)
    assert (meta["config"]["in_channels"], meta["config"]["image_size"], meta["config"]["num_classes"]) == (
        3,
        16,
        5,
    )
    trainer = make_trainer(framework, tcfg, architecture=architecture, space=RGB)
    train_loop(trainer, images, labels, tcfg, tmp_path, meta, progress=False)
    expert = load_expert(tmp_path, device="cpu", buckets=(4,))
    assert expert.card.sample_space == RGB
    v = expert.velocity(images, np.full(4, 0.5, np.float32), labels, guidance=np.ones(4, np.float32))
    assert v.shape == images.shape and np.isfinite(v).all()
