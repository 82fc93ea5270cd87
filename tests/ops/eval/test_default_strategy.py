"""`ddm eval` without --strategy samples with the deployment's default strategy, as `ddm submit` does,
and says which: the oracle it used to hard-code fails on a deployment without one (experts that share
labels, such as Fashion-MNIST's k-means clusters behind a learned router)."""

from __future__ import annotations

import pytest

from ddm.ops.cli import main
from ddm.ops.eval.strategy_choice import eval_strategy
from ddm.schema.deployment import Deployment
from tests.support.fakes import write_fake_deployment

SHARED = (("e0", "torch", range(0, 7)), ("e1", "jax", range(3, 10)))  # no label names one expert


def test_the_default_is_the_deployments(tmp_path):
    split = Deployment.load(write_fake_deployment(tmp_path / "split"))
    assert eval_strategy(split, None)[0] == "oracle"
    shared = Deployment.load(write_fake_deployment(tmp_path / "shared", SHARED, router="label-prior"))
    strategy, why = eval_strategy(shared, None)
    assert strategy == "top1" and "no oracle" in why
    chosen = Deployment.load(write_fake_deployment(tmp_path / "set", strategy="full"))
    assert eval_strategy(chosen, None) == ("full", "the deployment's default (`strategy` in deployment.toml)")
    assert eval_strategy(shared, "topk:2") == ("topk:2", "--strategy")


@pytest.mark.parametrize(("flags", "want"), [((), "top1"), (("--strategy", "full"), "full")])
def test_eval_samples_with_it_and_says_so(tmp_path, monkeypatch, capsys, flags, want):
    path = write_fake_deployment(tmp_path, SHARED, router="label-prior")
    seen = {}

    def evaluate(request):  # stands in for minutes of sampling: what would it sample with?
        seen["strategy"] = request.strategy
        raise SystemExit(0)

    monkeypatch.setattr("ddm.ops.eval.evaluate.evaluate", evaluate)
    with pytest.raises(SystemExit):
        main(["eval", "--deployment", str(path), "--total", "10", "--out", str(tmp_path / "o"), *flags])
    assert seen["strategy"] == want
    assert f"ddm eval: strategy {want} (" in capsys.readouterr().err
