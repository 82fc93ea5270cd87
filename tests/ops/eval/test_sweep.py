"""`ddm eval --sweep`: a 2 x 2 sweep (NFE x solver on the edm grid, plus the reference) on random tiny
(PyTorch) experts, a random classifier and synthetic "real" images (no data files): the JSON and table
structure, paired points, resume, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddm.ops.cli import main
from ddm.ops.eval.sweep import SweepPoint, load_sweep, sweep_points
from ddm.ops.eval.sweep_report import recommend, recommendation_line, sweep_table


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A random-weight evaluation classifier (dataset mnist; the images come from fake_real)."""
    import torch
    from safetensors.numpy import save_file

    from ddm.ops.eval.classifier import WEIGHTS, Classifier
    from ddm.schema.checkpoint_meta import write_meta

    folder = tmp_path_factory.mktemp("classifier")
    torch.manual_seed(0)
    save_file({k: v.numpy().copy() for k, v in Classifier().state_dict().items()}, str(folder / WEIGHTS))
    write_meta(folder, {"kind": "classifier", "framework": "torch", "dataset": "mnist", "test_accuracy": 0.1})
    return folder


@pytest.fixture
def fake_real(monkeypatch):
    """60 synthetic 'held-out' images in place of the MNIST test split."""
    from ddm.ops.data.dataset import Dataset

    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (60, 28, 28), dtype=np.uint8)
    fake = Dataset("mnist", "test[8000:]", images, np.arange(60) % 10)
    monkeypatch.setattr("ddm.ops.data.dataset.load_dataset", lambda *args, **kwargs: fake)


@pytest.fixture
def sampled(monkeypatch):
    """Which (solver, grid, steps) the sweep really sampled, in order."""
    import ddm.ops.eval.evaluate as evaluate

    calls, real = [], evaluate.sample_counted

    def counting(experts, policy, n, strategy, steps, guidance, seed, solver=None, grid=None, **kw):
        calls.append((solver, grid, steps))
        return real(experts, policy, n, strategy, steps, guidance, seed, solver=solver, grid=grid, **kw)

    monkeypatch.setattr(evaluate, "sample_counted", counting)
    return calls


def sweep_argv(deployment, out, classifier, tmp_path, total=10):
    return [
        "eval",
        "--deployment",
        str(deployment),
        "--sweep",
        str(out),
        "--nfe",
        "2,3",
        "--solvers",
        "euler,heun",
        "--grids",
        "edm",
        "--total",
        str(total),
        "--classifier",
        str(classifier),
    ]


def test_points_reference_first_fewest_evaluations_next_and_odd_nfe_rounded_down():
    points = sweep_points([5, 2], ["euler", "heun"], ["uniform"])
    assert [p.key for p in points] == [
        "euler uniform 50",
        "euler uniform 2",
        "heun uniform 2",
        "euler uniform 5",
        "heun uniform 5",
    ]
    heun5 = SweepPoint("heun", "uniform", 5)
    assert (heun5.steps, heun5.nfe) == (2, 4)
    assert SweepPoint("ab3", "shift:3", 6).steps == 6


def test_sweep_writes_paired_points_table_plot_and_resumes(
    shared_labels_deployment, classifier, fake_real, sampled, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr("ddm.ops.eval.sweep.FD_RESAMPLES", 10)  # 256-d FDs: the test's time goes there
    out = tmp_path / "sweep.json"
    argv = sweep_argv(shared_labels_deployment, out, classifier, tmp_path)
    assert main([*argv, "--plot", str(tmp_path / "sweep.png"), "--table", str(tmp_path / "sweep.md")]) == 0
    record = json.loads(out.read_text())
    assert record["kind"] == "ddm-nfe-sweep"
    assert record["settings"]["n"] == 10 and record["settings"]["strategy"] == "top1"
    points = record["points"]
    keys = [(p["solver"], p["grid"], p["nfe_asked"]) for p in points]
    assert keys[0] == ("euler", "uniform", 50)  # the reference, first
    assert len(keys) == 1 + 2 * 2 and len(set(keys)) == len(keys)
    assert len(sampled) == len(keys)
    for p in points:
        for key in ("accuracy", "fd", "fd_se", "accuracy_delta", "fd_ratio", "forward_passes_per_image"):
            assert isinstance(p[key], float), key
        for key in ("accuracy_ci95", "fd_ci95", "accuracy_delta_ci95", "fd_ratio_ci95"):
            lo, hi = p[key]
            assert lo <= hi, key
        assert p["nfe"] == p["steps"] * (2 if p["solver"] == "heun" else 1)
        assert "correct" not in p and "fd_draws" not in p  # only the reference keeps its draws
    heun3 = next(p for p in points if (p["solver"], p["nfe_asked"]) == ("heun", 3))
    assert (heun3["steps"], heun3["nfe"]) == (1, 2)
    ref = points[0]
    assert ref["accuracy_delta"] == 0.0 and ref["fd_ratio"] == 1.0
    assert ref["fd_ratio_ci95"] == [1.0, 1.0]  # paired draws: the reference against itself
    assert len(record["reference"]["correct"]) == 10
    assert record["fd_real_vs_real_n"] == 10
    # the table: accuracy, FD and the paired comparison, rows solver/grid, columns NFE
    table = (tmp_path / "sweep.md").read_text()
    assert table.strip() == sweep_table(record).strip()
    assert table.count("| solver | grid | NFE 2 | NFE 3 | NFE 50 |") == 3
    assert "| euler | uniform |" in table and "| heun | edm |" in table and "(2)" in table
    assert "| euler | edm |" in table
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Class accuracy" in capsys.readouterr().out

    # resume: drop the last two points, run again: only they are sampled, the rest is kept as it was
    record["points"] = points[:-2]
    out.write_text(json.dumps(record))
    sampled.clear()
    assert main(argv) == 0
    again = json.loads(out.read_text())
    assert [(s, g, st) for s, g, st in sampled] == [(p["solver"], p["grid"], p["steps"]) for p in points[-2:]]
    assert again["points"][:-2] == points[:-2]
    # the same noise: a resumed point is the point it would have been
    for a, b in zip(again["points"][-2:], points[-2:], strict=True):
        assert a["fd"] == pytest.approx(b["fd"]) and a["accuracy"] == b["accuracy"]

    # a finished sweep samples nothing; --render-only reads the file alone; other settings are refused
    sampled.clear()
    assert main(argv) == 0 and sampled == []
    capsys.readouterr()
    assert main(["eval", "--sweep", str(out), "--render-only"]) == 0
    assert capsys.readouterr().out.strip() == sweep_table(again).strip()
    assert main(sweep_argv(shared_labels_deployment, out, classifier, tmp_path, total=20)) == 2
    assert "other settings" in capsys.readouterr().err


def test_recommend_takes_the_cheapest_point_within_the_goal():
    def point(solver, nfe, delta, ratio, fd=1.0, width=0.0):
        return {
            "solver": solver,
            "grid": "uniform",
            "nfe": nfe,
            "steps": nfe,
            "accuracy_delta": delta,
            "accuracy_delta_ci95": [delta - width, delta + width],
            "fd_ratio": ratio,
            "fd_ratio_ci95": [ratio - width, ratio + width],
            "fd": fd,
        }

    record = {
        "points": [
            point("euler", 4, -0.05, 1.5),
            point("ab2", 6, -0.005, 1.08, fd=9.0, width=0.05),
            point("heun", 6, 0.0, 1.02, fd=8.0, width=0.05),
            point("ab3", 8, 0.0, 1.0, width=0.005),
            point("euler", 50, 0.0, 1.0),
        ]
    }
    assert recommend(record)["solver"] == "heun"  # 6 evaluations, the lower FD of the two
    assert recommend(record, sure=True)["solver"] == "ab3"  # the 6-evaluation intervals cross the goal
    assert recommend(record, max_nfe=4) is None
    line = recommendation_line(record)
    assert "heun on uniform at NFE 6" in line and "ab3 on uniform at NFE 8" in line


def test_load_sweep_refuses_a_foreign_file(tmp_path):
    from ddm.schema.errors import ConfigError

    path = tmp_path / "x.json"
    path.write_text(json.dumps({"accuracy": 1.0}))
    with pytest.raises(ConfigError, match="ddm eval --sweep"):
        load_sweep(path, {"n": 1})


def test_frechet_bootstrap_against_a_fixed_set_is_the_plain_bootstrap():
    """FrechetBootstrap caches the real side of every redraw; its draws are frechet_distance's, in the
    same order, for every generated set of one size (so two sets' draws are paired)."""
    from ddm.ops.eval.frechet import FrechetBootstrap, frechet_distance

    rng = np.random.default_rng(0)
    a, a2, b = rng.standard_normal((30, 8)) ** 2, rng.standard_normal((30, 8)), rng.standard_normal((90, 8))
    boot = FrechetBootstrap(b, 30, resamples=5, seed=3)
    draws = np.asarray(boot.score(a, keep_draws=True)["fd_draws"])
    plain, again = [], np.random.default_rng(3)
    for _ in range(5):
        rows_a, rows_b = again.integers(0, 30, 30), again.integers(0, 90, 90)
        plain.append(frechet_distance(a[rows_a], b[rows_b]))
    np.testing.assert_allclose(draws, plain, rtol=1e-9)
    assert len(boot.score(a2, keep_draws=True)["fd_draws"]) == 5
    with pytest.raises(ValueError):
        boot.score(a[:10])


def test_fd_ratio_interval_keeps_the_draws_spread_around_the_ratio(tmp_path):
    """Resampled FDs share a small-sample bias that pulls their ratio toward 1: the interval is the
    draws' percentile interval recentred (log scale) on the ratio. Files written before
    fd_ratio_draws95 (fd_ratio_ci95 held the draws' percentiles) are read the same way."""
    from ddm.ops.eval.sweep import KIND, ratio_interval, read_sweep

    lo, hi = ratio_interval(1.73, [1.11, 1.50])
    assert lo < 1.73 < hi and hi / lo == pytest.approx(1.50 / 1.11)
    point = {
        "solver": "euler",
        "grid": "uniform",
        "nfe_asked": 4,
        "fd_ratio": 1.73,
        "fd_ratio_ci95": [1.11, 1.5],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"kind": KIND, "settings": {}, "points": [point]}))
    (read,) = read_sweep(path)["points"]
    assert read["fd_ratio_draws95"] == [1.11, 1.5] and read["fd_ratio_ci95"] == [lo, hi]
