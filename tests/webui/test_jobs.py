"""Form parsing, the rate limiter and the deployment facts (no services needed)."""

from __future__ import annotations

import pytest

from ddm.schema.messages import JobSpec
from ddm.webui.jobs import DeploymentInfo, RateLimiter, SubmitError, parse_form
from tests.webui.conftest import write_fake_deployment


def test_parse_form_lays_images_out_row_by_row():
    spec = parse_form({"labels": [7, 2], "n_per_label": 3, "steps": 12, "strategy": "top1", "seed": 4})
    assert spec.labels == (2, 7, 2, 7, 2, 7) and spec.steps == 12 and spec.strategy == "top1"
    assert spec.guidance == 1.0 and spec.seed == 4
    assert parse_form({"labels": "all"}).labels == tuple(range(10))
    assert parse_form({"labels": [1], "steps": 5.0}).steps == 5  # a JSON number that is whole


@pytest.mark.parametrize(
    "form, words",
    [
        ({"labels": [1, 1]}, "each digit at most once"),
        ({"labels": [True]}, "digits 0..9"),
        ({"labels": [1], "steps": 2.5}, "steps: expected an integer"),
        ({"labels": [1], "steps": True}, "steps: expected an integer"),
        ({"labels": [1], "guidance": 21}, "guidance"),
        ({"labels": [1], "strategy": 3}, "strategy: expected a string"),
        ({"labels": [1], "strategy": "topk:0"}, "strategy"),
        ({"labels": [1], "n_per_label": 0}, "images per digit"),
        ({"labels": "some"}, "choose at least one digit"),
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


def test_deployment_info(tmp_path):
    info = DeploymentInfo.load(write_fake_deployment(tmp_path))
    assert info.strategies == ("oracle", "top1", "topk:2", "full")
    assert info.experts_needed(JobSpec.new([1, 2])) == [0]
    assert info.experts_needed(JobSpec.new([1, 9])) == [0, 1]
    assert info.experts_needed(JobSpec.new([1], strategy="top1")) == [0, 1]  # a router may pick any
    assert info.describe(1) == "expert 1 (jax, digits 5-9)"
    none = DeploymentInfo.load(None)
    assert none.experts == [] and none.experts_needed(JobSpec.new([3])) == []
