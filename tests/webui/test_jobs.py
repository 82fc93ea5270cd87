"""Form parsing, the rate limiter and the deployment facts from a descriptor (no services needed)."""

from __future__ import annotations

import dataclasses

import pytest

from ddm.schema.descriptor import ExpertInfo
from ddm.schema.messages import JobSpec
from ddm.webui.jobs import (
    SubmitError,
    describe_expert,
    labels_text,
    parse_form,
    trained_on,
)
from ddm.webui.rate_limit import RateLimiter
from tests.support.fakes import descriptor_of, write_fake_deployment


def test_parse_form_lays_images_out_row_by_row():
    spec = parse_form({"labels": [7, 2], "n_per_label": 3, "steps": 12, "strategy": "top1", "seed": 4})
    assert spec.labels == (2, 7, 2, 7, 2, 7) and spec.steps == 12 and spec.strategy == "top1"
    assert spec.guidance is None and spec.seed == 4  # the deployment's default, resolved by the router
    assert parse_form({"labels": [1], "strategy": None, "guidance": 2}).strategy is None
    assert parse_form({"labels": "all"}).labels == tuple(range(10))
    assert parse_form({"labels": [1], "steps": 5.0}).steps == 5  # a JSON number that is whole


@pytest.mark.parametrize(
    "form, words",
    [
        ({"labels": [1, 1]}, "each label at most once"),
        ({"labels": [True]}, "labels 0..9"),
        ({"labels": [1], "steps": 2.5}, "steps: expected an integer"),
        ({"labels": [1], "steps": True}, "steps: expected an integer"),
        ({"labels": [1], "guidance": 21}, "guidance"),
        ({"labels": [1], "strategy": 3}, "strategy: expected a string"),
        ({"labels": [1], "strategy": "topk:0"}, "strategy"),
        ({"labels": [1], "n_per_label": 0}, "images per label"),
        ({"labels": "some"}, "choose at least one label"),
    ],
)
def test_parse_form_refuses_bad_input_plainly(form, words):
    with pytest.raises(SubmitError) as info:
        parse_form(form)
    assert info.value.kind == "bad_input" and info.value.http_status == 400
    assert words in info.value.message


def test_rate_limiter_slides():
    now = [0.0]
    limiter = RateLimiter(2, window_s=60, clock=lambda: now[0])
    assert limiter.hit("a") is None and limiter.hit("a") is None
    assert limiter.hit("a") == pytest.approx(60)
    assert limiter.hit("b") is None  # per address
    now[0] = 30
    assert limiter.hit("a") == pytest.approx(30)
    now[0] = 60
    assert limiter.hit("a") is None


def test_deployment_facts_from_the_descriptor(tmp_path):
    d = descriptor_of(write_fake_deployment(tmp_path))
    assert d.strategies == ("oracle", "top1", "topk:2", "full") and d.default_strategy == "oracle"
    assert d.unserved(JobSpec.new([1, 2]), set()) == [0]  # the default strategy: the oracle
    assert d.unserved(JobSpec.new([1, 9], strategy="oracle"), {1}) == [0]
    assert d.unserved(JobSpec.new([1], strategy="top1"), {0}) == [1]  # a router may pick any
    assert d.unserved(JobSpec.new([1], strategy="full"), {1}) == [0], "waits for it by default"
    degrades = JobSpec.new([1], strategy="full", on_expert_loss="degrade")
    assert d.unserved(degrades, {1}) == []  # routes around expert 0
    assert d.unserved(JobSpec.new([1], strategy="full"), set()) == [0, 1]
    assert describe_expert(d, 1) == "expert 1 (jax, trained on 5-9)"
    fashion = descriptor_of(
        write_fake_deployment(tmp_path / "f"),
        class_names=tuple(f"c{y}" for y in range(10)),
        sample_space=None,  # the legacy space, renamed
    )
    assert describe_expert(fashion, 0) == "expert 0 (torch, trained on c0, c1, c2, c3, c4)"
    assert labels_text(None, [3, 1]) == "1, 3"


FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat")
FASHION += ("Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def counts_of(*pairs: tuple[int, int]) -> tuple[int, ...]:
    counts = [0] * 10
    for y, c in pairs:
        counts[y] = c
    return tuple(counts)


@pytest.mark.parametrize(
    ("counts", "words"),
    [
        # the shipped Fashion-MNIST k-means experts 3 and 1 (their meta.json label_counts)
        ((8, 1, 9, 2, 10, 887, 15, 1144, 1678, 5556), "Ankle boot 60%, Bag 18%, Sneaker 12% and 7 more"),
        (
            (4236, 5662, 102, 4738, 892, 1, 1295, 0, 655, 3),
            "Trouser 32%, Dress 27%, T-shirt/top 24% and 6 more",
        ),
        (counts_of((0, 900), (1, 100)), "T-shirt/top 90%, Trouser 10%"),  # three labels or fewer: no "more"
        (counts_of((0, 10000), (1, 10), (2, 10)), "T-shirt/top 100%, Trouser <1%, Pullover <1%"),
        (counts_of((0, 3), (1, 1)), "T-shirt/top 75%, Trouser 25%"),  # exactly 1.5 times the mean share
        (counts_of((0, 7), (1, 5)), "T-shirt/top, Trouser"),  # under it: even, the labels
        (counts_of((4, 100)), "Coat"),  # one label is never uneven
        ((3000,) * 9 + (2900,), ", ".join(FASHION)),  # a random shard
    ],
)
def test_an_uneven_cluster_is_described_by_its_largest_label_shares(tmp_path, counts, words):
    labels = tuple(y for y, c in enumerate(counts) if c)
    expert = ExpertInfo(0, "torch", "cpu", labels, "kmeans", counts)
    d = descriptor_of(write_fake_deployment(tmp_path), class_names=FASHION, sample_space=None)
    d = dataclasses.replace(d, experts=(expert, d.experts[1]))
    assert trained_on(d, expert) == words
    assert describe_expert(d, 0) == f"expert 0 (torch, trained on {words})"
    # a router before label_counts: the labels it saw
    assert trained_on(d, dataclasses.replace(expert, label_counts=())) == labels_text(d, labels)


def test_the_page_gets_each_strategys_words_from_the_server(tmp_path):
    """The page no longer parses strategies: /api/config carries what each one does."""
    from ddm.webui.jobs import deployment_payload

    d = descriptor_of(write_fake_deployment(tmp_path))
    hints = deployment_payload(d)["strategy_hints"]
    assert list(hints) == list(d.strategies)
    assert hints["topk:2"] == "the router's 2 most likely experts, weights renormalised"
    assert "label → expert" in hints["oracle"] and "every expert" in hints["full"]


def test_parse_form_takes_a_solver_and_grid_or_leaves_them_to_the_deployment():
    spec = parse_form({"labels": [1], "steps": 8, "solver": "heun", "grid": "shift:3.0"})
    assert (spec.solver, spec.grid) == ("heun", "shift:3")  # the grid in its canonical spelling
    unset = parse_form({"labels": [1], "solver": None, "grid": None})
    assert (unset.solver, unset.grid) == (None, None)  # the deployment's defaults, resolved by the router
    assert parse_form({"labels": [1]}).solver is None


@pytest.mark.parametrize(
    "form, words",
    [
        ({"labels": [1], "solver": "rk4"}, "solver one of euler, heun, midpoint, ab2, ab3, got 'rk4'"),
        ({"labels": [1], "solver": 2}, "solver: expected a string"),
        ({"labels": [1], "grid": "cosine"}, "grid 'uniform', 'shift:S'"),
        ({"labels": [1], "grid": "shift:0"}, "0.05 <= S <= 100"),
    ],
)
def test_parse_form_refuses_an_unknown_solver_or_grid_naming_the_known_ones(form, words):
    with pytest.raises(SubmitError) as info:
        parse_form(form)
    assert info.value.kind == "bad_input" and words in info.value.message


def test_the_page_gets_each_solvers_words_and_cost_from_the_server(tmp_path):
    """Hints and evaluations per step come from schema/solver.py (Solver.describe, Solver.stages)."""
    from ddm.schema.solver import LEGACY_OFFER, Solver
    from ddm.webui.jobs import deployment_payload

    d = descriptor_of(write_fake_deployment(tmp_path))  # the default offer: every solver
    payload = deployment_payload(d)
    assert payload["sampling"]["solvers"] == ["euler", "heun", "midpoint", "ab2", "ab3"]
    assert (
        payload["sampling"]["default_solver"] == "euler" and payload["sampling"]["default_grid"] == "uniform"
    )
    assert payload["solver_stages"] == {"euler": 1, "heun": 2, "midpoint": 2, "ab2": 1, "ab3": 1}
    hints = payload["solver_hints"]
    assert hints["heun"].startswith("2 evaluations per step") and hints["midpoint"].startswith(
        "2 evaluations"
    )
    assert hints["ab3"].startswith("1 per step, reuses the last 2 steps")
    assert hints["ab2"].startswith("1 per step, reuses the last step")
    assert hints == {s: Solver.parse(s).describe() for s in hints}  # one home for the words
    assert set(payload["grid_hints"]) == {"uniform", "shift:3", "edm"}
    assert "more steps near the noise" in payload["grid_hints"]["shift:3"]
    old = deployment_payload(dataclasses.replace(d, sampling=LEGACY_OFFER))  # a router from before solvers
    assert old["sampling"]["solvers"] == ["euler"] and list(old["solver_hints"]) == ["euler"]
    assert list(old["grid_hints"]) == ["uniform"]
