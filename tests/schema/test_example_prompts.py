"""A text deployment's example prompts (the web UI offers them to click): the deployment file's top-level
`example_prompts`, carried by the descriptor the router publishes, checked by one rule
(check_example_prompts) in both; a class deployment's file and descriptor read and write as before."""

from __future__ import annotations

import dataclasses

import pytest

from ddm.schema.conditioning import MAX_PROMPT_CHARS, Conditioning, TextEncoderSpec
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import MAX_EXAMPLE_PROMPTS, DeploymentDescriptor, ExpertInfo
from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.sample_space import SampleSpace
from tests.support.descriptors import demo_descriptor

SPACE = SampleSpace((3, 16, 16), (-1.0, 1.0))
TEXT = Conditioning("text", TextEncoderSpec("enc", "cd" * 32, "wordpiece", 64, 384, "pooled"))
EXAMPLES = ["a red heart", 'a "smiling" face \\ slash', "two lines\nand a\ttab", "ein Kätzchen 🐱"]


def test_the_file_round_trips_its_example_prompts(tmp_path):
    path = tmp_path / "text.toml"
    written = Deployment.build(path, ["e0"], sample_space=SPACE, conditioning=TEXT, example_prompts=EXAMPLES)
    loaded = Deployment.load(written.write())
    assert loaded.example_prompts == tuple(EXAMPLES) and loaded == written
    plain = Deployment.build(tmp_path / "plain.toml", ["e0"])
    assert plain.example_prompts == () and "example_prompts" not in plain.to_toml()


@pytest.mark.parametrize(
    "examples, conditioning, words",
    [
        (["a cat"], None, "no example_prompts: the deployment is conditioned on class labels"),
        (["p"] * (MAX_EXAMPLE_PROMPTS + 1), TEXT, f"a list of 0..{MAX_EXAMPLE_PROMPTS} prompts"),
        ("a cat", TEXT, "a list of 0.."),
        (["  "], TEXT, "example_prompts[0], a prompt with words"),
        (["ok", "x" * (MAX_PROMPT_CHARS + 1)], TEXT, f"example_prompts[1] of at most {MAX_PROMPT_CHARS}"),
        (["bell\x07"], TEXT, "example_prompts[0] without control characters"),
        ([3], TEXT, "example_prompts[0] as text"),
    ],
)
def test_bad_example_prompts_are_refused_by_the_file_and_the_descriptor(
    tmp_path, examples, conditioning, words
):
    space = SPACE if conditioning is not None else None
    fields = {"sample_space": space, "conditioning": conditioning} if conditioning else {}
    with pytest.raises(ConfigError, match="example_prompts") as info:
        Deployment.build(tmp_path / "d.toml", ["e0"], example_prompts=examples, **fields)
    assert words in str(info.value)
    with pytest.raises(SchemaError) as info:
        text_descriptor(examples) if conditioning else demo_descriptor(example_prompts=examples)
    assert words in str(info.value)


def text_descriptor(examples) -> DeploymentDescriptor:
    """One expert conditioned on prompts (no classes), with `examples`."""
    return dataclasses.replace(
        demo_descriptor(),
        experts=(ExpertInfo(0, "torch", "cpu", (), "random"),),
        strategies=("top1", "full"),
        default_strategy="full",
        class_names=(),
        sample_space=SPACE,
        conditioning=TEXT,
        example_prompts=examples,
    )


def test_the_descriptor_carries_them_only_when_set():
    text = text_descriptor(EXAMPLES)
    back = DeploymentDescriptor.decode(text.encode())
    assert back == text and back.example_prompts == tuple(EXAMPLES)
    assert "example_prompts" not in demo_descriptor().to_dict()  # what a router before them wrote
    without = dataclasses.replace(text, example_prompts=())
    assert "example_prompts" not in without.to_dict()
    assert DeploymentDescriptor.decode(without.encode()).example_prompts == ()
