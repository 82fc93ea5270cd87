"""Form parsing, the rate limiter and the deployment facts from a descriptor (no services needed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ddm.schema.messages import JobSpec
from ddm.webui.jobs import (
    RateLimiter,
    SubmitError,
    describe_expert,
    labels_text,
    parse_form,
    trained_on,
)
from tests.support.fakes import descriptor_of, write_fake_deployment

FASHION = Path(__file__).resolve().parents[2] / "checkpoints" / "fashion-mnist" / "deployment.toml"


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
    assert d.unserved(JobSpec.new([1], strategy="full"), {1}) == []  # routes around expert 0
    assert d.unserved(JobSpec.new([1], strategy="full"), set()) == [0, 1]
    assert describe_expert(d, 1) == "expert 1 (jax, trained on 5-9)"
    fashion = descriptor_of(
        write_fake_deployment(tmp_path / "f"), class_names=tuple(f"c{y}" for y in range(10))
    )
    assert describe_expert(fashion, 0) == "expert 0 (torch, trained on c0, c1, c2, c3, c4)"
    assert labels_text(None, [3, 1]) == "1, 3"


def test_an_uneven_cluster_is_described_by_its_largest_label_shares():
    # the shipped Fashion-MNIST k-means experts: each saw almost every class, mostly a few
    d = descriptor_of(FASHION)
    assert trained_on(d, d.experts[3]) == "Ankle boot 60%, Bag 18%, Sneaker 12% and 7 more"
    shares = "Trouser 32%, Dress 27%, T-shirt/top 24% and 6 more"
    assert describe_expert(d, 1) == f"expert 1 (torch, trained on {shares})"
    # even shares (a label split, a random shard) keep the list of labels
    even = dataclasses.replace(d.experts[0], labels=tuple(range(10)), label_counts=(3000,) * 9 + (2900,))
    assert trained_on(d, even) == ", ".join(d.class_names)
    assert trained_on(d, dataclasses.replace(even, label_counts=())) == ", ".join(d.class_names)
