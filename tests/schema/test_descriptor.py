"""The deployment descriptor: the serving router's word on what a job means."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ddm.schema import JobSpec, SchemaError
from ddm.schema.descriptor import DeploymentDescriptor, ExpertInfo
from ddm.schema.solver import LEGACY_OFFER, SamplingOffer
from ddm.schema.strategy import Strategy, accepted_strategies, default_strategy
from tests.support.descriptors import demo_descriptor


def descriptor(**changes) -> DeploymentDescriptor:
    return demo_descriptor(**changes)


def test_round_trip_is_exact():
    d = descriptor()
    assert DeploymentDescriptor.decode(d.encode()) == d


KMEANS_COUNTS = (8, 1, 9, 2, 10, 887, 15, 1144, 1678, 5556)  # a Fashion-MNIST k-means cluster


def test_label_counts_travel_when_known_and_stay_optional():
    kmeans = ExpertInfo(1, "jax", "auto", tuple(range(10)), "kmeans", KMEANS_COUNTS)
    d = descriptor(experts=(descriptor().experts[0], kmeans))
    assert DeploymentDescriptor.decode(d.encode()) == d
    wire = d.to_dict()["experts"]
    assert "label_counts" not in wire[0] and wire[1]["label_counts"] == list(KMEANS_COUNTS)
    # a router before label_counts wrote none: still a descriptor, with no counts
    del wire[1]["label_counts"]
    assert ExpertInfo.from_dict(wire[1]).label_counts == ()


@pytest.mark.parametrize(
    ("labels", "counts", "match"),
    [
        (tuple(range(10)), (0,) + (1,) * 9, "non-zero exactly at labels"),  # label 0 listed, never seen
        ((0, 1, 2, 3, 4), (1,) * 10, "non-zero exactly at labels"),  # seen, not listed
        (tuple(range(1, 10)), (-1,) + (1,) * 9, "non-negative"),  # what a router would publish, refused
    ],
)
def test_label_counts_that_contradict_the_labels_are_refused(labels, counts, match):
    with pytest.raises(SchemaError, match=match):
        ExpertInfo(0, "torch", "cpu", labels, "kmeans", counts)


def test_label_counts_not_one_per_class_of_the_space_are_refused():
    """ExpertInfo alone does not know the sample space; the descriptor sizes the counts by it."""
    expert = ExpertInfo(0, "torch", "cpu", (0, 1), "kmeans", (1, 2))
    with pytest.raises(SchemaError, match="10 counts"):
        descriptor(experts=(expert, descriptor().experts[1]))


@pytest.mark.parametrize("counts", [[-1] + [1] * 9, "1,2", [1.5] * 10])
def test_decode_refuses_label_counts_that_are_not_counts(counts):
    wire = descriptor().to_dict()["experts"][0] | {"labels": list(range(10)), "label_counts": counts}
    with pytest.raises(SchemaError, match="label_counts"):
        ExpertInfo.from_dict(wire)


def test_resolve_fills_only_what_the_job_left_unset():
    d = descriptor()
    spec = JobSpec("j", (3,))
    assert (str(d.resolve(spec).strategy), d.resolve(spec).guidance) == ("oracle", 1.5)
    assert d.resolve(spec).on_expert_loss == "wait", "the default: no silent change of model"
    chosen = JobSpec(
        "j", (3,), strategy="full", guidance=1.0, on_expert_loss="wait", solver="euler", grid="uniform"
    )
    assert d.resolve(chosen).spec == chosen
    assert (d.resolve(spec).spec.solver, d.resolve(spec).spec.grid) == ("euler", "uniform")


def test_solvers_and_grids_resolve_to_the_deployments_defaults_and_refuse_what_it_does_not_serve():
    offer = SamplingOffer(
        solvers=("euler", "heun", "ab2"), grids=("uniform", "edm"), default_solver="ab2", default_grid="edm"
    )
    d = dataclasses.replace(descriptor(), sampling=offer)
    resolved = d.resolve(JobSpec("j", (3,)))
    assert (str(resolved.solver), str(resolved.grid), resolved.nfe) == ("ab2", "edm", 50)
    assert d.resolve(JobSpec("j", (3,), steps=8, solver="heun")).nfe == 16
    with pytest.raises(SchemaError, match="solver one of euler, heun, ab2, got 'ab3'"):
        d.check(JobSpec("j", (3,), solver="ab3"))
    with pytest.raises(SchemaError, match="grid one of uniform, edm, got 'shift:3'"):
        d.check(JobSpec("j", (3,), grid="shift:3.0"))
    assert DeploymentDescriptor.decode(d.encode()).sampling == offer


def test_a_descriptor_from_before_solvers_serves_euler_on_the_uniform_grid_only():
    wire = descriptor().to_dict()
    del wire["sampling"]
    old = DeploymentDescriptor.decode(json.dumps(wire))
    assert old.sampling == LEGACY_OFFER
    old.check(JobSpec("j", (3,), solver="euler", grid="uniform"))
    with pytest.raises(SchemaError, match="solver one of euler, got 'heun'"):
        old.check(JobSpec("j", (3,), solver="heun"))


def test_the_experts_a_job_needs_follow_its_strategy_and_expert_loss_policy():
    d = descriptor()
    assert d.experts_needed(JobSpec("j", (3, 4))) == ((0,), True), "oracle: the experts of its labels"
    assert d.experts_needed(JobSpec("j", (3,), strategy="top1")) == ((0, 1), True), "any may be picked"
    degrades = JobSpec("j", (3,), strategy="full", on_expert_loss="degrade")
    assert d.experts_needed(degrades) == ((0, 1), False), "any one live will do"
    waits = JobSpec("j", (3,), strategy="full", on_expert_loss="wait")
    assert d.experts_needed(waits) == ((0, 1), True), "a job that waits needs every one"
    assert d.experts_needed(JobSpec("j", (3,), strategy="full")) == d.experts_needed(waits), "the default"
    degrade_by_default = descriptor(default_on_expert_loss="degrade")
    assert degrade_by_default.experts_needed(JobSpec("j", (3,), strategy="full")) == ((0, 1), False)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (JobSpec("j", (3,), strategy="topk:3"), r"strategy in \['oracle', 'top1', 'topk:2', 'full'\]"),
        (JobSpec("j", (9,)), r"labels some expert was trained on \[0, 1, 2, 3, 4, 5, 6, 7, 8\], got \[9\]"),
    ],
)
def test_check_refuses_what_the_deployment_cannot_serve(spec, message):
    with pytest.raises(SchemaError, match=message):
        descriptor().check(spec)


def test_check_accepts_any_spelling_of_an_accepted_strategy():
    descriptor().check(JobSpec("j", (3,), strategy="topk:1"))


@pytest.mark.parametrize(
    "changes",
    [
        {"default_strategy": "topk:3"},
        {"strategies": ("topk:1", "full"), "default_strategy": "full"},
        {"default_guidance": 21.0},
        {"class_names": ("a",)},
        {"experts": ()},
        {"protocol_version": 2},
        {"router_id": "a b"},
        {"default_on_expert_loss": "retry"},
    ],
)
def test_invalid_descriptors_are_refused(changes):
    with pytest.raises(SchemaError):
        descriptor(**changes)


@pytest.mark.parametrize(
    "text",
    [b"not json", b"[]", b"{}", b'{"name": "x"}', b"[" * 100_000],
)
def test_decode_refuses_anything_else(text):
    with pytest.raises(SchemaError):
        DeploymentDescriptor.decode(text)


def test_decode_refuses_extra_keys():
    d = descriptor().to_dict()
    d["extra"] = 1
    import json

    with pytest.raises(SchemaError, match="keys"):
        DeploymentDescriptor.decode(json.dumps(d))


def test_accepted_strategies_grow_with_the_experts():
    assert accepted_strategies(1, has_oracle=False) == ("top1", "full")
    assert accepted_strategies(3, has_oracle=False) == ("top1", "topk:2", "topk:3", "full")
    assert accepted_strategies(2, has_oracle=True) == ("oracle", "top1", "topk:2", "full")
    assert (default_strategy(True), default_strategy(False)) == ("oracle", "top1")


@pytest.mark.parametrize(
    ("text", "canonical"), [("top1", "top1"), ("topk:1", "top1"), ("topk:12", "topk:12")]
)
def test_strategy_has_one_canonical_spelling(text, canonical):
    assert str(Strategy.parse(text)) == canonical


# -- the sample space and the experts' cards -------------------------------------------------------


def test_a_descriptor_without_sample_space_decodes_as_the_legacy_space():
    """What a router before sample spaces published: 1x32x32 with 10 classes, named by class_names."""
    from ddm.schema.sample_space import LEGACY

    wire = descriptor().to_dict()
    assert wire["sample_space"] == LEGACY.to_dict()  # encode always writes it
    del wire["sample_space"]
    old = DeploymentDescriptor.decode(json.dumps(wire))
    assert old.sample_space == LEGACY and old.null_class == 10
    names = [f"c{c}" for c in range(10)]
    renamed = DeploymentDescriptor.decode(json.dumps(wire | {"class_names": names}))
    assert renamed.sample_space.shape == (1, 32, 32) and renamed.sample_space.class_names == tuple(names)


def test_a_colour_space_round_trips_and_sizes_labels():
    from ddm.schema.sample_space import SampleSpace

    space = SampleSpace((3, 16, 16), num_classes=3, class_names=("a", "b", "c"))
    card = {
        "framework": "jax",
        "architecture": "dit",
        "objective": "ddpm-eps",
        "schedule": {"name": "linear", "beta_min": 0.1, "beta_max": 20.0},
        "time_convention": "t0-data",
    }
    experts = (
        ExpertInfo(0, "torch", "cpu", (0, 1), "kmeans", (3, 1, 0)),
        ExpertInfo(1, "jax", "cpu", (2,), "kmeans", (0, 0, 4), card),
    )
    d = descriptor(
        experts=experts,
        sample_space=space,
        class_names=space.class_names,
        router_kind="learned",
        default_strategy="top1",
        strategies=("top1", "topk:2", "full"),
    )
    back = DeploymentDescriptor.decode(d.encode())
    assert back == d and back.sample_space == space and back.null_class == 3
    assert back.experts[1].card == card and "card" not in d.to_dict()["experts"][0]
    assert back.label_name(3) == "unconditional" and back.label_name(2) == "c"
    with pytest.raises(SchemaError, match="class_names equal to sample_space"):
        descriptor(experts=experts, sample_space=space, class_names=("x", "y", "z"))
    with pytest.raises(SchemaError, match=r"labels in 0..2"):
        descriptor(
            experts=(ExpertInfo(0, "torch", "cpu", (0, 5), "kmeans"),) + experts[1:],
            sample_space=space,
            class_names=space.class_names,
        )
    with pytest.raises(SchemaError, match="expert card with keys"):
        ExpertInfo(0, "torch", "cpu", (0,), "kmeans", card={"framework": "torch"})
