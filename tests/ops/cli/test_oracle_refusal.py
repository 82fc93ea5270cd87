"""The refusal of unconditional images under the oracle strategy names what would work on this
deployment: the strategies it accepts that read x_t (it used to print the syntax's literal "topk:K"),
or, behind a label-table router, another deployment (--deployment)."""

from __future__ import annotations

from pathlib import Path

from ddm.ops.cli import main

SHIPPED = Path(__file__).resolve().parents[3] / "checkpoints" / "mnist" / "deployment.toml"  # learned router


def test_a_learned_router_names_the_strategies_it_accepts(capsys):
    argv = ["sample", "--deployment", str(SHIPPED), "--unconditional", "--strategy", "oracle", "--n", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "which reads x_t (this deployment accepts top1, topk:2 or full), or leave the strategy unset" in err
    )
    assert "topk:K" not in err


def test_a_label_table_router_points_at_another_deployment(label_split_deployment, capsys):
    argv = [
        "sample",
        "--deployment",
        str(label_split_deployment),
        "--labels",
        "3,null",
        "--strategy",
        "oracle",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "this deployment's router (kind 'oracle') routes by label only" in err
    assert (
        "need a deployment whose router reads x_t (router kind 'learned'; `ddm sample` takes --deployment"
        in err
    )
    assert "topk:K" not in err
