"""A deployment's conditioning as a record of the contract (issue 37, part 1): none, class or text with
its encoder; a job's prompt and negative prompt; a class deployment refuses prompts and a text one class
labels; the record round-trips through the deployment file and the descriptor, and a deployment
without it means exactly today's class conditioning (its files and descriptors unchanged)."""

from __future__ import annotations

import dataclasses

import pytest

from ddm.schema.conditioning import MAX_PROMPT_CHARS, Conditioning, TextEncoderSpec
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.messages import JobSpec
from ddm.schema.sample_space import LEGACY, SampleSpace
from tests.support.descriptors import demo_descriptor

MINILM = TextEncoderSpec("sentence-transformers/all-MiniLM-L6-v2", "ab" * 32, "wordpiece", 64, 384, "pooled")
TEXT = Conditioning("text", MINILM)
EMOJI = SampleSpace((3, 32, 32), (-1.0, 1.0))  # no classes: a text deployment's images


def text_descriptor() -> DeploymentDescriptor:
    experts = tuple(dataclasses.replace(e, labels=(), label_counts=()) for e in demo_descriptor().experts)
    return demo_descriptor(
        "learned",
        experts=experts,
        class_names=(),
        sample_space=EMOJI,
        conditioning=TEXT,
        strategies=("top1", "topk:2", "full"),
        default_strategy="top1",
    )


def test_the_default_is_todays_class_conditioning():
    assert Conditioning.of(LEGACY) == Conditioning("class") and Conditioning.of(EMOJI) == Conditioning("none")
    d = demo_descriptor()
    assert d.conditioning == Conditioning("class")
    assert "conditioning" not in d.to_dict(), "a class deployment's descriptor reads as before the record"


def test_the_record_round_trips_and_checks_itself():
    assert Conditioning.from_dict(TEXT.to_dict()) == TEXT
    assert MINILM.embedding_shape == (384,) and dataclasses.replace(
        MINILM, form="tokens"
    ).embedding_shape == (
        64,
        384,
    )
    with pytest.raises(SchemaError, match="kind in"):
        Conditioning("image")
    with pytest.raises(SchemaError, match="a text encoder exactly when the kind is text"):
        Conditioning("text")
    with pytest.raises(SchemaError, match="digest, 64 lower-case hex"):
        dataclasses.replace(MINILM, digest="xyz")
    with pytest.raises(SchemaError, match="a sample space without classes for text conditioning"):
        TEXT.check_space(LEGACY)


@pytest.mark.parametrize(
    "prompt, words",
    [
        ("a\x00b", "without control characters"),
        ("x" * (MAX_PROMPT_CHARS + 1), f"at most {MAX_PROMPT_CHARS} characters"),
        ("\ud800", "valid Unicode"),
        (b"bytes", "as text"),
    ],
)
def test_a_bad_prompt_is_refused_saying_why(prompt, words):
    with pytest.raises(SchemaError, match=words):
        JobSpec.new([0], prompt=prompt)


def test_a_prompt_travels_in_the_spec_and_an_unset_one_changes_no_byte():
    plain = JobSpec("j1", (3,), steps=4, seed=1)
    assert "prompt" not in plain.to_dict() and JobSpec.decode(plain.encode()) == plain
    spec = JobSpec.new([0], prompt="a blue heart\nsmall", negative_prompt="red")
    assert JobSpec.decode(spec.encode()) == spec and JobSpec.from_json(spec.to_json()) == spec
    with pytest.raises(SchemaError, match="a prompt with the negative prompt"):
        JobSpec.new([0], negative_prompt="red")


def test_a_class_deployment_refuses_a_prompt_and_a_text_one_class_labels():
    with pytest.raises(SchemaError, match="conditioned on class labels, not prompts"):
        demo_descriptor().check(JobSpec.new([3], prompt="a three"))
    text = text_descriptor()
    text.check(JobSpec.new([None, None], prompt="a blue heart"))
    with pytest.raises(SchemaError, match="not class labels"):
        text.check(JobSpec.new([0], prompt="a blue heart"))  # 0 is K here: a number, refused
    with pytest.raises(
        SchemaError, match=r"conditioned on prompts \(sentence-transformers.*not class labels"
    ):
        text.check(JobSpec.new([3], prompt="a blue heart"))
    assert DeploymentDescriptor.decode(text.encode()) == text


def test_the_deployment_file_declares_it(tmp_path):
    (tmp_path / "e0").mkdir()
    plain = Deployment.build(tmp_path / "plain.toml", ["e0"])
    assert plain.conditioning == Conditioning("class") and "[conditioning]" not in plain.to_toml()
    text = Deployment.build(tmp_path / "text.toml", ["e0"], sample_space=EMOJI, conditioning=TEXT)
    assert Deployment.load(text.write()).conditioning == TEXT
    with pytest.raises(ConfigError, match=r"\[conditioning\]: .*a sample space without classes"):
        Deployment.build(tmp_path / "bad.toml", ["e0"], conditioning=TEXT)
