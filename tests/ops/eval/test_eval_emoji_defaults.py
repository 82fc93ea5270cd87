"""`ddm eval` on the emoji deployments (issue 40 item 5): the real images come from the split the
deployment's classifier was measured on (emoji's `test`, not MNIST's `test[8000:]`, which failed after
41 s of sampling); emoji-latent ships a reference to the emoji classifier; a deployment without one is
named before any sampling; at small n a real-vs-real FD above the model's comes with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddm.ops.eval.classifier import eval_classifier, fd_warning, held_out_split
from ddm.ops.eval.evaluate import EvalRequest, evaluate
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from tests.support.fakes import write_fake_deployment

SHIPPED = Path(__file__).resolve().parents[3] / "checkpoints"


def test_the_real_split_is_the_one_the_classifier_was_measured_on():
    assert EvalRequest(deployment=Path("x")).real_split is None  # no MNIST default any more
    for name, split in (("emoji", "test"), ("emoji-latent", "test"), ("mnist", "test[8000:]")):
        _, _, meta = eval_classifier(SHIPPED / name / "deployment.toml", None)
        assert held_out_split(meta, None) == split, name
    assert held_out_split({"eval_split": "test"}, "test[:50]") == "test[:50]"  # asked for: as asked


def test_emoji_latent_is_scored_by_the_emoji_classifier_on_its_decoded_pictures():
    path, _, meta = eval_classifier(SHIPPED / "emoji-latent" / "deployment.toml", None)
    assert path.resolve() == (SHIPPED / "emoji" / "classifier").resolve() and meta["dataset"] == "emoji"
    space = Deployment.load(SHIPPED / "emoji-latent" / "deployment.toml").sample_space
    assert (meta["num_classes"], meta["in_channels"], meta["image_size"]) == (space.num_classes, 3, 32)


def test_a_deployment_without_a_classifier_is_named_before_sampling(tmp_path):
    path = write_fake_deployment(tmp_path / "d")
    with pytest.raises(ConfigError, match=r"ships no evaluation classifier .*--classifier"):
        evaluate(EvalRequest(deployment=path, n=10))


def test_a_real_floor_above_the_models_fd_warns_that_n_is_too_small():
    said = fd_warning({"fd": 120.0, "fd_real_vs_real": 180.0, "fd_real_vs_real_n": 9, "n": 9})
    assert "n is too small" in said and "180.0" in said and "120.0" in said
    assert fd_warning({"fd": 20.0, "fd_real_vs_real": 3.0, "fd_real_vs_real_n": 500, "n": 1000}) is None
