"""`ddm eval` loads the classifier and the real images it scores against before it samples (minutes of
work): a missing data folder or classifier fails in seconds, and nothing was sampled."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddm.ops.cli import main

SHIPPED = Path(__file__).resolve().parents[3] / "checkpoints" / "mnist"


@pytest.fixture
def no_sampling(monkeypatch):
    """Sampling would be a bug here: fail the test if eval gets that far."""

    def generate(*args, **kwargs):
        raise AssertionError("eval sampled before it had its data and classifier")

    monkeypatch.setattr("ddm.ops.eval.evaluate.generate", generate)


def test_a_missing_data_folder_fails_before_sampling(tmp_path, no_sampling, capsys):
    t0 = time.monotonic()
    argv = ["eval", "--deployment", str(SHIPPED / "deployment.toml"), "--data-dir", str(tmp_path / "none")]
    assert main([*argv, "--n", "1", "--out", str(tmp_path / "out")]) == 2
    assert time.monotonic() - t0 < 60  # loading the classifier, not 11 minutes of sampling
    err = capsys.readouterr().err
    assert "mnist test files" in err and "not found" in err and "ddm data fetch mnist" in err
    assert not (tmp_path / "out").exists()


def test_a_missing_classifier_fails_before_sampling(tmp_path, no_sampling, capsys):
    argv = ["eval", "--deployment", str(SHIPPED / "deployment.toml"), "--classifier", str(tmp_path)]
    assert main([*argv, "--total", "10", "--out", str(tmp_path / "out")]) == 2
    assert "a classifier checkpoint folder with meta.json" in capsys.readouterr().err
