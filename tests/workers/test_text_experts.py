"""Text-conditioned experts (pooled prompt embedding in the class embedding's place), both architectures,
both frameworks: twin parity through load_expert, guidance against uncond by the formula, class
experts unchanged, bad embeddings refused, the card's conditioning round trip, the encoder digest check,
and a few training steps on prompts encoded by the real text encoder. Real tiny models, no mocks."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.conditioning import Conditioning, TextEncoderSpec, check_encoder, text_sample_space
from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.expert_card import ExpertCard, card_of
from ddm.schema.sample_space import LEGACY
from ddm.workers import load_expert
from ddm.workers.architectures import expert_architecture
from ddm.workers.checkpoint import expert_meta, read_meta
from ddm.workers.config import PRESETS as UNET_PRESETS
from ddm.workers.config import UNetConfig
from ddm.workers.dit.config import PRESETS as DIT_PRESETS
from ddm.workers.dit.config import DiTConfig
from ddm.workers.dit.layout import canonical_shapes
from ddm.workers.frameworks import FRAMEWORKS
from ddm.workers.text_conditions import encode_prompts
from ddm.workers.training import TrainConfig, make_trainer, train_loop
from tests.support.weights import randomize_

TOLERANCE = 1e-4
WIDTH = 384
PARTITION = {"id": "text", "dataset": "synthetic", "split": "none"}
COUNTS = [10] * 10
SPACE = text_sample_space(LEGACY)  # 1x32x32 in [-1, 1], no classes: every label is the null label 0
SPEC = TextEncoderSpec("sentence-transformers/all-MiniLM-L6-v2", "ab" * 32, "wordpiece", 64, WIDTH, "pooled")
TEXT = Conditioning("text", SPEC)


def randomized(arch: str, cfg) -> dict[str, np.ndarray]:
    """Canonical weights, every parameter random (the zero-initialised output layers too, or parity would
    be trivial): N(0, 1/fan_in) for matrices, N(0, 1) for the text Linear (a unit-length embedding then
    moves the conditioning by O(1)), norms near 1."""
    model = randomize_(expert_architecture(arch).build("torch", cfg), 1, unit="text_emb")
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def write_text_expert(folder: Path, framework: str, arch: str, weights: dict | None = None) -> Path:
    meta = expert_meta(
        framework, "tiny", 0, PARTITION, COUNTS, architecture=arch, sample_space=SPACE, conditioning=TEXT
    )
    cfg = expert_architecture(arch).config_from(meta["config"])
    folder.mkdir(parents=True)
    FRAMEWORKS[framework].save_canonical(folder, weights or randomized(arch, cfg), cfg)
    write_meta(folder, meta)
    return folder


def unit_rows(n: int, seed: int) -> np.ndarray:
    c = np.random.default_rng(seed).standard_normal((n, WIDTH)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def inputs(n: int = 4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 1, 32, 32)).astype(np.float32)
    t = np.linspace(0.1, 0.9, n).astype(np.float32)
    return x, t, unit_rows(n, 1), unit_rows(n, 2)


def test_config_text_width_and_shapes():
    assert "text_width" not in UNetConfig().to_dict() and "text_width" not in DiTConfig().to_dict()
    assert UNetConfig.from_dict(UNET_PRESETS["tiny"].to_dict()).text_width == 0
    text = replace(DIT_PRESETS["tiny"], text_width=WIDTH)
    assert text.to_dict()["text_width"] == WIDTH and DiTConfig.from_dict(text.to_dict()) == text
    shapes = canonical_shapes(text)
    assert shapes["text_embed.weight"] == (64, WIDTH) and "y_embed.weight" not in shapes
    torch_dit = expert_architecture("dit").build("torch", text)
    assert {k: tuple(v.shape) for k, v in torch_dit.state_dict().items()} == shapes
    with pytest.raises(ConfigError, match="text_width an int >= 0"):
        UNetConfig(text_width=-1)


@pytest.mark.parametrize("arch", ["unet", "dit"])
def test_torch_and_flax_agree_through_load_expert(tmp_path, arch):
    cfg = replace(expert_architecture(arch).preset("tiny", SPACE), text_width=WIDTH)
    weights = randomized(arch, cfg)
    experts = {
        fw: load_expert(write_text_expert(tmp_path / fw, fw, arch, weights), device="cpu", buckets=(8,))
        for fw in ("torch", "jax")
    }
    x, t, cond, uncond = inputs()
    guidance = np.array([1.0, 3.0, 1.0, 0.5], np.float32)
    v = {fw: e.velocity(x, t, guidance=guidance, cond=cond, uncond=uncond) for fw, e in experts.items()}
    assert {e.text_width for e in experts.values()} == {WIDTH}
    assert np.std(v["torch"]) > 0.05
    assert np.max(np.abs(v["torch"][0] - v["torch"][2])) > 1e-3  # rows differ: cond and t reach v
    diff = float(np.max(np.abs(v["torch"] - v["jax"])))
    print(
        f"\ntext {arch} parity: max |v_torch - v_jax| = {diff:.3e} (|v| max {np.abs(v['torch']).max():.2f})"
    )
    assert diff <= TOLERANCE


def test_guidance_with_uncond_is_the_formula(tmp_path):
    expert = load_expert(write_text_expert(tmp_path / "e", "torch", "unet"), device="cpu")
    x, t, cond, uncond = inputs()
    g = np.array([1.0, 2.5, 0.0, 7.0], np.float32)
    guided = expert.velocity(x, t, guidance=g, cond=cond, uncond=uncond)
    v_c = expert.velocity(x, t, cond=cond)  # guidance 1: no uncond needed
    v_u = expert.velocity(x, t, cond=uncond)
    want = v_u + g[:, None, None, None] * (v_c - v_u)
    np.testing.assert_allclose(guided, want, atol=2e-5)
    # an unguided row is the conditional velocity (to float rounding: the guided call's batch has 7
    # rows, this one 4, and oneDNN's convolutions on AVX-512 machines round differently by batch size)
    np.testing.assert_allclose(guided[0], v_c[0], rtol=0, atol=1e-5)
    assert np.max(np.abs(v_c - v_u)) > 1e-3  # the prompt matters
    # y: omitted or the null label (0 in a space without classes)
    np.testing.assert_array_equal(expert.velocity(x, t, np.zeros(4, np.int64), cond=cond), v_c)


def test_bad_embeddings_are_refused_naming_the_shape(tmp_path):
    expert = load_expert(write_text_expert(tmp_path / "e", "torch", "dit"), device="cpu")
    x, t, cond, uncond = inputs()
    for bad, match in (
        (None, r"cond float32 \[B=4, 384\].*got 'nothing'"),
        (cond[:, :100], r"cond float32 \[B=4, 384\].*\(4, 100\)"),
        (cond.astype(np.float64), r"cond float32 \[B=4, 384\].*float64"),
        (cond[:3], r"cond float32 \[B=4, 384\]"),
    ):
        with pytest.raises(SchemaError, match=match):
            expert.velocity(x, t, cond=bad)
    with pytest.raises(SchemaError, match=r"uncond float32 \[B=4, 384\].*guidance != 1"):
        expert.velocity(x, t, guidance=2.0, cond=cond)
    with pytest.raises(SchemaError, match=r"uncond float32 \[B=4, 384\]"):
        expert.velocity(x, t, guidance=2.0, cond=cond, uncond=uncond[:, :3])
    with pytest.raises(SchemaError, match="the null label 0"):
        expert.velocity(x, t, np.array([0, 1, 0, 0]), cond=cond)


def test_class_experts_are_unchanged_and_refuse_embeddings(tmp_path):
    meta = expert_meta("torch", "tiny", 0, PARTITION, COUNTS)
    assert "text_width" not in meta["config"] and "conditioning" not in meta["card"]
    folder = tmp_path / "class"
    folder.mkdir()
    cfg = UNET_PRESETS["tiny"]
    FRAMEWORKS["torch"].save_canonical(folder, randomized("unet", cfg), cfg)
    write_meta(folder, meta)
    expert = load_expert(folder, device="cpu")
    assert expert.text_width == 0
    x, t, cond, _ = inputs()
    y = np.array([0, 3, 9, 10])
    with pytest.raises(SchemaError, match="no cond or uncond for a class-conditioned expert"):
        expert.velocity(x, t, y, cond=cond)
    with pytest.raises(SchemaError, match="y integer"):
        expert.velocity(x, t)
    assert expert.velocity(x, t, y, 2.0).shape == x.shape


def test_card_conditioning_round_trip(tmp_path):
    folder = write_text_expert(tmp_path / "e", "jax", "unet")
    meta = read_meta(folder)
    card = card_of(meta)
    assert card.conditioning == TEXT and card.text_width == WIDTH and meta["config"]["text_width"] == WIDTH
    assert meta["card"]["conditioning"] == {"kind": "text", "text": SPEC.to_dict()}
    assert ExpertCard.from_dict(card.to_dict()) == card
    assert "prompts (sentence-transformers/all-MiniLM-L6-v2" in card.describe()
    with pytest.raises(SchemaError, match="a sample space without classes for text conditioning"):
        ExpertCard("torch", sample_space=LEGACY, conditioning=TEXT)
    with pytest.raises(ConfigError, match="without classes"):
        expert_meta("torch", "tiny", 0, PARTITION, COUNTS, conditioning=TEXT)  # LEGACY has classes
    with pytest.raises(ConfigError, match="form pooled"):
        tokens = Conditioning("text", replace(SPEC, form="tokens"))
        expert_meta("torch", "tiny", 0, PARTITION, COUNTS, sample_space=SPACE, conditioning=tokens)
    wrong = {**meta, "config": {**meta["config"], "text_width": 128}}
    write_meta(folder, wrong)
    with pytest.raises(ConfigError, match="config text_width 384"):
        read_meta(folder)


def test_conversion_keeps_a_text_expert(tmp_path):
    from ddm.workers.convert import convert

    src = write_text_expert(tmp_path / "torch", "torch", "dit")
    convert(src, "jax", tmp_path / "jax")
    assert card_of(read_meta(tmp_path / "jax")).conditioning == TEXT
    dit = expert_architecture("dit")
    want = FRAMEWORKS["torch"].load_canonical(src, dit)
    got = FRAMEWORKS["jax"].load_canonical(tmp_path / "jax", dit)
    assert got.keys() == want.keys() and "text_embed.weight" in got
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_encoder_check_names_both_digests():
    check_encoder(TEXT, TEXT)
    check_encoder(None, Conditioning("class"))  # a card without the record is a class expert
    other = Conditioning("text", replace(SPEC, digest="cd" * 32))
    with pytest.raises(SchemaError) as caught:
        check_encoder(other, TEXT)
    assert "cd" * 32 in str(caught.value) and "ab" * 32 in str(caught.value)
    with pytest.raises(SchemaError, match="max_tokens 32 vs 64"):
        check_encoder(Conditioning("text", replace(SPEC, max_tokens=32)), TEXT)
    with pytest.raises(SchemaError, match="conditioned on prompts"):
        check_encoder(None, TEXT)
    with pytest.raises(SchemaError, match="conditioned on class labels"):
        check_encoder(TEXT, None)


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_few_training_steps_on_encoded_prompts(tmp_path, framework):
    from ddm.workers.text_encoder import load_text_encoder

    encoder = load_text_encoder("pooled")
    variants = [("red apple", "apple, fruit"), ("green apple",), (), ("red apple", "cherry")]
    table = encode_prompts(variants, encoder)
    assert table.uncaptioned == 1 and len(table.embeddings) == 5  # "", and 4 distinct prompts
    np.testing.assert_array_equal(table.empty, encoder.encode([""])[0][0])
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (4, 1, 32, 32)).astype(np.float32)
    tcfg = TrainConfig(preset="tiny", steps=2, batch=4, warmup=1, save_every=2, label_dropout=0.5)
    conditioning = Conditioning("text", encoder.spec)
    meta = expert_meta(framework, "tiny", 0, PARTITION, COUNTS, sample_space=SPACE, conditioning=conditioning)
    trainer = make_trainer(framework, tcfg, space=SPACE, text_width=encoder.spec.width)
    with pytest.raises(ConfigError, match="prompts encoded by the card's text encoder"):
        train_loop(trainer, images, np.zeros(4, np.int64), tcfg, tmp_path, meta, progress=False)
    final = train_loop(trainer, images, np.zeros(4, np.int64), tcfg, tmp_path, meta, False, text=table)
    assert final["steps"] == 2 and math.isfinite(final["final_loss"])
    expert = load_expert(tmp_path, device="cpu", buckets=(8,))
    assert card_of(read_meta(tmp_path)).conditioning == conditioning and expert.text_width == 384
    cond, _ = encoder.encode(["red apple", "cherry"])
    uncond = np.repeat(table.empty[None], 2, axis=0)
    v = expert.velocity(images[:2], np.array([0.3, 0.6], np.float32), guidance=2.0, cond=cond, uncond=uncond)
    assert v.shape == (2, 1, 32, 32) and np.isfinite(v).all()


def test_ddm_train_expert_text_pooled(tmp_path):
    """The command: captions of an emoji split encoded once, a text expert whose card names the encoder."""
    from ddm.ops.cli import main
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.partitions import make_partition
    from ddm.schema.partition import write_manifest

    data = tmp_path / "data"
    part = write_manifest(
        tmp_path / "part.json", make_partition(load_dataset("emoji", "train[:24]", data), "all")
    )
    out = tmp_path / "expert"
    argv = ["train", "expert", "--framework", "torch", "--partition", str(part), "--expert", "0", "--text"]
    more = ["--preset", "tiny", "--steps", "2", "--batch", "4", "--data-dir", str(data), "--out", str(out)]
    assert main([*argv, "pooled", *more, "--no-progress"]) == 0
    meta = read_meta(out)
    text = meta["card"]["conditioning"]["text"]
    assert text["form"] == "pooled" and text["width"] == WIDTH and meta["config"]["text_width"] == WIDTH
    assert meta["card"]["sample_space"]["num_classes"] == 0 and meta["prompts"]["images"] == 24
    assert load_expert(out, device="cpu").text_width == WIDTH


def test_stored_caption_embeddings_train_the_same_expert_as_the_encoder(tmp_path):
    """`ddm data embed-captions` then `--prompt-embeddings`: the encoder is not loaded, and the expert is
    the one training with the encoder gives, weight for weight (the same embeddings, the same card)."""
    from safetensors.numpy import load_file

    from ddm.ops.cli import main
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.partitions import make_partition
    from ddm.schema.partition import write_manifest
    from ddm.workers.stored_prompts import StoredPrompts

    data, stored = tmp_path / "data", tmp_path / "captions.npz"
    part = write_manifest(
        tmp_path / "part.json", make_partition(load_dataset("emoji", "train[:24]", data), "all")
    )
    assert (
        main(
            [
                "data",
                "embed-captions",
                "emoji",
                "--split",
                "train[:24]",
                "--data-dir",
                str(data),
                "--out",
                str(stored),
            ]
        )
        == 0
    )
    argv = [
        "train",
        "expert",
        "--framework",
        "torch",
        "--partition",
        str(part),
        "--expert",
        "0",
        "--text",
        "pooled",
    ]
    more = ["--preset", "tiny", "--steps", "2", "--batch", "4", "--data-dir", str(data), "--no-progress"]
    assert main([*argv, *more, "--out", str(tmp_path / "a")]) == 0
    assert main([*argv, *more, "--prompt-embeddings", str(stored), "--out", str(tmp_path / "b")]) == 0
    a, b = (load_file(tmp_path / name / "model.safetensors") for name in "ab")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert read_meta(tmp_path / "a")["card"] == read_meta(tmp_path / "b")["card"]
    with pytest.raises(ConfigError, match="holds no embedding for 1 prompt"):
        StoredPrompts(stored).encode(["a prompt no emoji has"])
