"""Unconditional images in the contract: a JobSpec label may be None (null on the wire; NULL_CLASS, 10,
inside once resolved, and in job hashes from before null), and the deployment descriptor (the one check
the client, the web UI, the router and `ddm sample` share) says what each strategy does with it: the
router's strategies route it, 'oracle' refuses it, and a job that names no strategy gets top1 where the
default is the oracle."""

from __future__ import annotations

import pytest

from ddm.schema import JobSpec, SchemaError
from ddm.schema.descriptor import (
    DeploymentDescriptor,
    label_name,
    labels_summary,
)
from ddm.schema.flow import NULL_CLASS
from tests.support.descriptors import demo_descriptor


def descriptor(**changes) -> DeploymentDescriptor:
    return demo_descriptor("learned", (5, 6, 7, 8, 9), **changes)


def test_a_job_spec_takes_the_null_label_and_keeps_it_on_the_wire():
    spec = JobSpec("j", (3, None, None), strategy="full")
    assert spec.labels == (3, None, None) and spec.unconditional == 2 and spec.n == 3
    assert JobSpec.decode(spec.encode()) == spec
    assert JobSpec.from_json(spec.to_json()) == spec and spec.to_dict()["labels"] == [3, None, None]
    assert JobSpec("j", (3,)).unconditional == 0


@pytest.mark.parametrize("label", [100_001, -1, True, 3.0])
def test_a_job_spec_refuses_other_labels_and_says_what_the_null_class_is(label):
    with pytest.raises(SchemaError, match=r"label int in 0..100000 \(a class 0..K-1\), or null"):
        JobSpec("j", (label,))


def test_the_legacy_space_bounds_labels_at_its_null_class():
    from ddm.schema.sample_space import LEGACY

    with pytest.raises(SchemaError, match=r"labels in 0..9, or null \(an unconditional image\)"):
        JobSpec("j", (11,)).check_space(LEGACY)


def test_oracle_refuses_a_null_label_naming_the_strategy_and_the_label():
    d = descriptor()
    for spec in (
        JobSpec("j", (None,), strategy="oracle"),
        JobSpec("j", (2, None), strategy="oracle"),
    ):
        with pytest.raises(SchemaError) as info:
            d.check(spec)
        message = str(info.value)
        assert message.startswith(
            "deployment 'demo' (served by router-a): strategy 'oracle' routes each image"
        )
        assert "1 image(s) carry the null label 10 (unconditional)" in message
        with pytest.raises(SchemaError, match="strategy 'oracle'"):
            d.experts_needed(spec)  # the same rule: the job cannot run, so it needs no list of experts
    for strategy in ("top1", "topk:2", "full"):
        d.check(JobSpec("j", (2, None), strategy=strategy))  # the router reads x_t


def test_a_job_that_names_no_strategy_gets_top1_where_the_default_is_the_oracle():
    d = descriptor()
    mixed = JobSpec("j", (2, None))
    d.check(mixed)
    assert d.resolve(mixed).spec.strategy == "top1" and d.default_strategy_for(mixed) == "top1"
    assert d.resolve(JobSpec("j", (2,))).spec.strategy == "oracle", "labelled jobs keep the default"
    assert descriptor(default_strategy="full").resolve(mixed).spec.strategy == "full"
    assert d.resolve(mixed).guidance == 1.5  # recorded as asked; the sampler gives null rows 1


def test_the_experts_an_unconditional_job_needs():
    d = descriptor()
    assert d.experts_needed(JobSpec("j", (None,))) == ((0, 1), True), "top1: any may be picked"
    degrades = JobSpec("j", (None,), strategy="full", on_expert_loss="degrade")
    assert d.experts_needed(degrades) == ((0, 1), False), "any one live will do"
    assert d.unserved(JobSpec("j", (None,)), {0}) == [1]
    assert d.unserved(degrades, {0}) == []
    assert d.unserved(JobSpec("j", (None,), strategy="full"), {0}) == [1], "waits by default"


def test_labels_are_named_by_the_class_names_and_the_null_label_as_unconditional():
    names = ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot")
    assert label_name(7, names) == "Sneaker" and label_name(NULL_CLASS, names) == "unconditional"
    assert labels_summary((3, NULL_CLASS, 3)) == "3,unconditional,3"
    assert descriptor(class_names=names).label_name(NULL_CLASS) == "unconditional"
