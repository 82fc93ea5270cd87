"""`ddm up` checks, before it starts anything, that every child's install extra is importable here, and
refuses with one message naming the extra and the pip command (it used to start the children, each of
which died MAX_START_FAILURES times before the output named the missing module). A missing module is
simulated by hiding it from find_spec in this process; nothing is uninstalled."""

from __future__ import annotations

import importlib.util

import pytest

from ddm.ops.cli import main
from ddm.ops.up.extras_check import planned_extras
from ddm.schema.deployment import Deployment
from ddm.workers.checkpoint import read_meta
from tests.support.fakes import write_fake_deployment


@pytest.fixture
def hide(monkeypatch):
    """hide('torch', ...): find_spec answers None for those top-level modules, as on an install without."""
    real = importlib.util.find_spec

    def hide(*modules):
        def find_spec(name, *args, **kwargs):
            return None if name.split(".")[0] in modules else real(name, *args, **kwargs)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    return hide


@pytest.fixture
def nothing_starts(monkeypatch):
    def start(self):
        raise AssertionError("ddm up started children without the extras they need")

    monkeypatch.setattr("ddm.ops.up.supervisor.Supervisor.start", start)


def test_what_each_child_needs(tmp_path):
    dep = Deployment.load(write_fake_deployment(tmp_path / "a"))  # e0 torch, e1 jax, oracle router
    metas = {e.id: read_meta(e.checkpoint) for e in dep.experts}
    assert planned_extras(dep, metas, ui=False) == {"torch": ["expert 0 (torch)"], "jax": ["expert 1 (jax)"]}
    both = (("e0", "torch", range(10)), ("e1", "torch", range(10)))
    dep = Deployment.load(write_fake_deployment(tmp_path / "b", both, router="learned"))
    metas = {e.id: read_meta(e.checkpoint) for e in dep.experts}
    assert planned_extras(dep, metas, ui=True) == {
        "torch": ["expert 0 (torch)", "expert 1 (torch)"],
        "jax": ["the learned router"],
        "ui": ["the web UI (--no-ui to go without)"],
    }


def test_a_missing_framework_is_named_before_anything_starts(tmp_path, hide, nothing_starts, capsys):
    hide("torch")
    assert main(["up", "--deployment", str(write_fake_deployment(tmp_path)), "--no-ui"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "ddm up: nothing was started: expert 0 (torch) needs the torch extra (no module torch). "
        "Install with: pip install 'ddm-pipeline[torch]'\n"
    )


def test_every_missing_extra_in_one_message(tmp_path, hide, nothing_starts, capsys):
    hide("jax", "flask", "flask_socketio")  # a client-only install that has torch
    assert main(["up", "--deployment", str(write_fake_deployment(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert "expert 1 (jax) needs the jax extra (no module jax)" in err
    assert "the web UI (--no-ui to go without) needs the ui extra (no module flask, flask_socketio)" in err
    assert err.endswith("pip install 'ddm-pipeline[jax,ui]'\n") and err.count("\n") == 1
