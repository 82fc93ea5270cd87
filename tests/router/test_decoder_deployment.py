"""A latent deployment's [decoder] (issue 29): refused at load when its latent space is not the
deployment's or its experts learnt another encoder's latents, naming both; written and read back;
published in the descriptor."""

from __future__ import annotations

import json
import shutil

import pytest

from ddm.router.deployment_loader import decoder_card, expert_cards
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import ConfigError
from ddm.workers.autoencoder.checkpoint import read_card
from tests.support.fakes import descriptor_of
from tests.support.latent import write_latent_deployment


@pytest.fixture(scope="module")
def latent(tmp_path_factory):
    return write_latent_deployment(tmp_path_factory.mktemp("latent"))


@pytest.fixture
def copy(latent, tmp_path):
    shutil.copytree(latent.parent, tmp_path / "d")
    return tmp_path / "d" / "deployment.toml"


def _say_trained_on(folder, dataset: str) -> None:
    """Make an expert's meta say its partition was of `dataset` (as `ddm train expert` records it)."""
    meta = json.loads((folder / "meta.json").read_text())
    meta["partition"]["dataset"] = meta["card"]["trained_on"]["partition"]["dataset"] = dataset
    (folder / "meta.json").write_text(json.dumps(meta))


def test_the_decoder_round_trips_through_the_file_and_the_descriptor(latent):
    deployment = Deployment.load(latent)
    assert deployment.decoder.checkpoint == latent.parent / "autoencoder"
    assert Deployment.load(deployment.write()).decoder == deployment.decoder
    descriptor = descriptor_of(latent)
    card = decoder_card(deployment)
    assert descriptor.decoder.encoder_id == card.encoder_id and descriptor.image_space.shape == (3, 32, 32)
    assert DeploymentDescriptor.decode(descriptor.encode()) == descriptor


def test_a_decoder_of_another_latent_space_is_refused_naming_both(copy):
    meta_path = copy.parent / "autoencoder" / "meta.json"
    meta = json.loads(meta_path.read_text())
    lo, hi = meta["card"]["value_range"]
    meta["card"]["value_range"] = [lo - 1, hi + 1]  # the latents of another normalisation
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ConfigError) as err:
        expert_cards(Deployment.load(copy))
    said = str(err.value)
    assert "the decoder" in said and "latents 4x8x8" in said and "not the deployment's sample space" in said
    assert f"value_range [{lo - 1}, {hi + 1}] vs [{lo}, {hi}]" in said


def test_experts_of_another_encoders_latents_are_refused_naming_both(copy):
    deployment = Deployment.load(copy)
    _say_trained_on(copy.parent / "e1_jax", "emoji~ae-000000000000")
    with pytest.raises(ConfigError) as err:
        expert_cards(deployment)
    said = str(err.value)
    assert "expert 1" in said and "ae-000000000000 latents" in said
    encoder = read_card(copy.parent / "autoencoder").encoder_id
    assert f"the decoder {deployment.decoder.checkpoint} is {encoder}" in said


def test_experts_of_latents_without_a_decoder_are_refused(copy):
    _say_trained_on(copy.parent / "e0_torch", "emoji~ae-000000000000")
    text = copy.read_text()
    start = text.index("[decoder]")
    copy.write_text(text[:start] + text[text.index("[sample_space]") :])
    with pytest.raises(ConfigError, match="no \\[decoder\\] to turn them into pictures"):
        expert_cards(Deployment.load(copy))


def test_a_malformed_decoder_table_says_what_was_expected(copy):
    copy.write_text(copy.read_text().replace('checkpoint = "autoencoder"', "checkpoint = 3"))
    with pytest.raises(ConfigError, match="expected \\[decoder\\] with checkpoint"):
        Deployment.load(copy)


def test_a_decoder_worker_for_a_deployment_without_a_decoder_says_so(label_split_deployment):
    from ddm.schema.settings import Settings
    from ddm.workers.decoder_worker import DecoderWorker

    with pytest.raises(ConfigError, match=r"expected a \[decoder\] table in .*deployment.toml"):
        DecoderWorker(Settings(), label_split_deployment)
