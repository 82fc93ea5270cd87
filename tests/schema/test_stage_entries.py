"""A deployment file's stage tables (schema/stage_entries.py): [text_encoder] (where a text deployment's
encoder weights and tokenizer are, e.g. Paris's CLIP folders) and [decoder], read relative to the file,
written back by the one writer, and refused when malformed."""

from __future__ import annotations

import pytest

from ddm.schema.conditioning import Conditioning, TextEncoderSpec
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from ddm.schema.sample_space import SampleSpace

CLIP = TextEncoderSpec("openai/clip-vit-large-patch14", "ab" * 32, "clip-bpe", 77, 768, "tokens")
TEXT = {
    "sample_space": SampleSpace((4, 32, 32), (-4.0, 4.0)),
    "conditioning": Conditioning("text", CLIP),
}


def test_a_text_encoder_table_round_trips_through_the_one_writer(tmp_path):
    paris = tmp_path / "paris"  # an absolute folder elsewhere, as the importer names it
    built = Deployment.build(
        tmp_path / "out" / "deployment.toml",
        ["e0"],
        text_encoder={
            "checkpoint": str(paris / "text_encoder"),
            "tokenizer": str(paris / "tokenizer"),
            "device": "auto",
        },
        **TEXT,
    )
    entry = built.text_encoder
    assert (entry.checkpoint, entry.tokenizer, entry.device) == (
        paris / "text_encoder",
        paris / "tokenizer",
        "auto",
    )
    text = built.to_toml()
    assert '[text_encoder]\ncheckpoint = "../paris/text_encoder"\ntokenizer = "../paris/tokenizer"' in text
    assert Deployment.load(built.write()) == built
    assert Deployment.load(built.path).conditioning.text == CLIP


def test_the_tokenizer_defaults_to_the_checkpoints_folder_and_the_device_to_cpu(tmp_path):
    path = tmp_path / "deployment.toml"
    built = Deployment.build(path, ["e0"], text_encoder={"checkpoint": "clip"}, **TEXT)
    assert built.text_encoder.checkpoint == built.text_encoder.tokenizer == tmp_path / "clip"
    assert built.text_encoder.device == "cpu"
    assert built.to_toml().endswith('[text_encoder]\ncheckpoint = "clip"\ndevice = "cpu"\n')
    assert Deployment.load(built.write()) == built


def test_without_the_table_a_text_deployment_means_the_wheels_encoder(tmp_path):
    built = Deployment.build(tmp_path / "deployment.toml", ["e0"], **TEXT)
    assert built.text_encoder is None and "[text_encoder]" not in built.to_toml()


@pytest.mark.parametrize(
    "table, match",
    [
        ({"tokenizer": "tok"}, "checkpoint"),
        ({"checkpoint": "clip", "dtype": "fp16"}, "text_encoder"),
        ({"checkpoint": 3}, "text_encoder"),
        ("clip", "text_encoder"),
    ],
)
def test_a_malformed_table_is_refused_saying_what_was_expected(tmp_path, table, match):
    with pytest.raises(ConfigError, match=match):
        Deployment.build(tmp_path / "deployment.toml", ["e0"], text_encoder=table, **TEXT)


def test_a_text_encoder_table_needs_text_conditioning(tmp_path):
    with pytest.raises(ConfigError, match=r"\[text_encoder\] table only with \[conditioning\] kind = text"):
        Deployment.build(tmp_path / "deployment.toml", ["e0"], text_encoder={"checkpoint": "clip"})


def test_the_decoder_table_reads_and_writes_as_before(tmp_path):
    built = Deployment.build(tmp_path / "deployment.toml", ["e0"], decoder={"checkpoint": "vae"}, **TEXT)
    assert (built.decoder.checkpoint, built.decoder.device) == (tmp_path / "vae", "auto")
    assert '[decoder]\ncheckpoint = "vae"\ndevice = "auto"' in built.to_toml()
    assert Deployment.load(built.write()) == built
    with pytest.raises(ConfigError, match=r"\[decoder\] with checkpoint"):
        Deployment.build(tmp_path / "deployment.toml", ["e0"], decoder={"device": "cpu"}, **TEXT)
