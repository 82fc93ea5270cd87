"""The sample space and expert card records (schema/sample_space.py, schema/expert_card.py): round trips,
checked decoding that names what was expected, the LEGACY defaults, differences for refusals."""

from __future__ import annotations

import json

import pytest

from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.expert_card import (
    FLOW,
    ExpertCard,
    Objective,
    Schedule,
    TrainedOn,
    card_of,
    legacy_card,
    new_card,
    stamp_card,
)
from ddm.schema.flow import IMAGE_SHAPE, NULL_CLASS, NUM_CLASSES
from ddm.schema.sample_space import LEGACY, SampleSpace

META = {
    "framework": "jax",
    "expert": 1,
    "partition": {"id": "p1", "dataset": "mnist"},
    "label_counts": [0] * 5 + [7] * 5,
    "steps": 12,
}
RGB = SampleSpace((3, 64, 64), (0.0, 1.0), 3, ("cat", "dog", "fox"))


def test_legacy_is_todays_space():
    assert LEGACY.shape == IMAGE_SHAPE == (1, 32, 32) and LEGACY.num_classes == NUM_CLASSES == 10
    assert LEGACY.null_class == NULL_CLASS == 10 and LEGACY.class_names == tuple("0123456789")
    assert LEGACY.value_range == (-1.0, 1.0)


def test_sample_space_round_trips_and_derives_the_null_class():
    for space in (LEGACY, RGB, SampleSpace((4, 8, 8))):
        assert SampleSpace.from_dict(json.loads(json.dumps(space.to_dict()))) == space
    unconditional = SampleSpace((4, 8, 8))
    assert unconditional.null_class == 0 and not unconditional.conditional
    assert "unconditional" in unconditional.describe() and RGB.describe().startswith(
        "3x64x64 in [0, 1], 3 classes"
    )


@pytest.mark.parametrize(
    "data, message",
    [
        ([1, 32, 32], "a JSON object"),
        ({"shape": [1, 32, 32], "value_range": [-1, 1]}, r"missing \['num_classes'\]"),
        ({**LEGACY.to_dict(), "dtype": "f4"}, r"unknown \['dtype'\]"),
        ({**LEGACY.to_dict(), "shape": [1, 32]}, r"shape \(C, H, W\), three positive ints"),
        ({**LEGACY.to_dict(), "shape": [1, 0, 32]}, "three positive ints"),
        ({**LEGACY.to_dict(), "value_range": [1, -1]}, "lo < hi"),
        ({**LEGACY.to_dict(), "num_classes": -1}, "num_classes an int >= 0"),
        ({**LEGACY.to_dict(), "class_names": ["a"]}, "class_names, 10 non-empty strings"),
        ({**LEGACY.to_dict(), "num_classes": True}, "num_classes an int"),
    ],
)
def test_sample_space_decoding_says_what_it_expected(data, message):
    with pytest.raises(SchemaError, match=message):
        SampleSpace.from_dict(data)


def test_describe_difference_names_each_field():
    assert LEGACY.describe_difference(LEGACY) == ""
    assert (
        LEGACY.describe_difference(RGB)
        == "shape 1x32x32 vs 3x64x64; value_range [-1.0, 1.0] vs [0.0, 1.0]; num_classes 10 vs 3"
    )
    renamed = SampleSpace((1, 32, 32), num_classes=10, class_names=("zero",) + LEGACY.class_names[1:])
    assert LEGACY.describe_difference(renamed) == "class_names differ at label 0 ('0' vs 'zero')"


def test_objectives_schedules_and_time_conventions_are_checked():
    with pytest.raises(
        SchemaError, match=r"objective in \['flow-velocity', 'ddpm-eps', 'ddpm-x0', 'ddpm-v'\]"
    ):
        Objective("edm")
    with pytest.raises(SchemaError, match=r"schedule in \['linear', 'cosine', 'discrete-linear'\]"):
        Schedule("sigmoid")
    with pytest.raises(SchemaError, match=r"time convention in \['t0-noise', 't0-data'\]"):
        Objective(time_convention="t1-noise")
    with pytest.raises(SchemaError, match="linear schedule parameters"):
        Schedule.make("linear", s=0.1)
    with pytest.raises(SchemaError, match="a VP schedule"):
        Objective("ddpm-eps")
    with pytest.raises(SchemaError, match="no schedule for flow-velocity"):
        Objective(schedule=Schedule("cosine"))
    assert Objective.parse("ddpm-v").schedule == Schedule.make("linear", beta_min=0.1, beta_max=20.0)
    assert Schedule.parse("linear:beta_min=0.2, beta_max=10").to_dict() == {
        "name": "linear",
        "beta_max": 10.0,
        "beta_min": 0.2,
    }
    with pytest.raises(SchemaError, match="key=number"):
        Schedule.parse("cosine:s")


def test_a_card_round_trips_through_json():
    card = new_card(META, Objective.parse("ddpm-x0", "cosine:s=0.01", "t0-data"), LEGACY, "ab" * 32)
    assert ExpertCard.from_dict(json.loads(json.dumps(card.to_dict()))) == card
    assert card.trained_on == TrainedOn(META["partition"], 1, tuple(META["label_counts"]), 12)


def test_a_meta_without_a_card_gets_the_legacy_card():
    card = card_of(META)
    assert card == legacy_card(META) and card.derived
    assert card.objective == FLOW and card.objective.is_identity and card.sample_space == LEGACY
    assert card.architecture == "unet" and card.weights_sha256 is None


def test_card_decoding_refuses_what_it_does_not_know():
    good = new_card(META).to_dict()
    for bad, message in [
        ({**good, "objective": "score"}, "ddpm-eps"),
        ({**good, "schedule": {"name": "cosine", "s": 0.008}}, "no schedule for flow-velocity"),
        ({**good, "time_convention": "reverse"}, "t0-noise"),
        ({**good, "weights_sha256": "xyz"}, "64 lowercase hex"),
        ({**good, "extra": 1}, r"unknown \['extra'\]"),
        ({k: v for k, v in good.items() if k != "trained_on"}, r"missing \['trained_on'\]"),
        ({**good, "trained_on": {**good["trained_on"], "label_counts": [1, 2]}}, "one per class"),
    ]:
        with pytest.raises(ConfigError, match=message):
            card_of({**META, "card": bad})
    with pytest.raises(ConfigError, match="card's framework equal to meta.json's 'torch'"):
        card_of({**META, "framework": "torch", "card": good})
    with pytest.raises(ConfigError, match="architecture"):
        card_of({**META, "architecture": "dit", "card": good})


def test_stamp_card_follows_the_meta_and_keeps_the_declared_objective():
    eps = Objective.parse("ddpm-eps")
    meta = {**META, "card": new_card(META, eps).to_dict()}
    stamped = stamp_card({**meta, "framework": "torch", "steps": 40}, "cd" * 32)
    card = card_of(stamped)
    assert card.framework == "torch" and card.trained_on.steps == 40 and card.weights_sha256 == "cd" * 32
    assert card.objective == eps
    assert card_of(stamp_card(META, None)).objective == FLOW  # a meta without a card: the LEGACY one
