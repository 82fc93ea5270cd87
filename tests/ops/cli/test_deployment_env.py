"""Which deployment a command uses: --deployment, else $DDM_DEPLOYMENT (containers), else the shipped one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddm.schema.deployment import DEFAULT_DEPLOYMENT, resolve_deployment
from ddm.schema.errors import ConfigError


def test_flag_wins_over_environment(monkeypatch):
    monkeypatch.setenv("DDM_DEPLOYMENT", "/srv/ddm/checkpoints/mnist/deployment.toml")
    assert resolve_deployment(Path("mine.toml")) == Path("mine.toml")


def test_environment_when_no_flag(monkeypatch, tmp_path):
    monkeypatch.setenv("DDM_DEPLOYMENT", str(tmp_path / "d.toml"))
    monkeypatch.chdir(tmp_path)
    assert resolve_deployment(None) == tmp_path / "d.toml"


def test_shipped_default_then_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("DDM_DEPLOYMENT", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="DDM_DEPLOYMENT unset"):
        resolve_deployment(None)
    (tmp_path / DEFAULT_DEPLOYMENT).parent.mkdir(parents=True)
    (tmp_path / DEFAULT_DEPLOYMENT).write_text('name = "x"\n')
    assert resolve_deployment(None) == DEFAULT_DEPLOYMENT
    monkeypatch.setenv("DDM_DEPLOYMENT", "")  # empty = unset
    assert resolve_deployment(None) == DEFAULT_DEPLOYMENT


def test_worker_flags(monkeypatch):
    from ddm.ops.cli import build_parser

    argv = ["worker", "expert", "--expert", "0", "--metrics-port", "9100"]
    assert build_parser(argv).parse_args(argv).metrics_port == 9100
    argv = ["worker", "router"]
    args = build_parser(argv).parse_args(argv)
    assert args.metrics_port is None and args.deployment is None  # None: from the environment


def test_a_folder_means_its_deployment_toml(monkeypatch, tmp_path):
    """`ddm up --deployment checkpoints/emoji` (a folder) said "not found" (issue 40 part 7)."""
    (tmp_path / "emoji").mkdir()
    (tmp_path / "emoji" / "deployment.toml").write_text('name = "x"\n')
    assert resolve_deployment(tmp_path / "emoji") == tmp_path / "emoji" / "deployment.toml"
    monkeypatch.setenv("DDM_DEPLOYMENT", str(tmp_path / "emoji"))
    assert resolve_deployment(None) == tmp_path / "emoji" / "deployment.toml"
    assert resolve_deployment(tmp_path) == tmp_path, "a folder without one is left to say not found"
