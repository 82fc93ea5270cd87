"""Evaluation maths and plumbing: Frechet distance, augmentation, counting forward passes."""

from __future__ import annotations

import json

import numpy as np

from ddm.ops.eval.classifier import augment
from ddm.ops.eval.evaluate import CountingExpert
from ddm.ops.eval.frechet import frechet_distance


def test_frechet_distance_known_answers():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4000, 3))
    assert frechet_distance(a, a) < 1e-8
    shifted = a + np.array([3.0, 0.0, 4.0])
    assert abs(frechet_distance(a, shifted) - 25.0) < 1e-6  # same covariance: |mu_a - mu_b|^2
    scaled = a * 2.0  # N(0, I) vs N(0, 4I) in 3-d: 3 * (1 + 4 - 2 * 2) = 3
    assert abs(frechet_distance(a, scaled) - 3.0) < 0.15


def test_augment_shifts_without_inventing_ink():
    x = -np.ones((5, 1, 32, 32), np.float32)
    x[:, :, 10:20, 10:20] = 1.0
    out = augment(x, np.random.default_rng(0))
    assert out.shape == x.shape
    assert (out == 1.0).sum() == (x == 1.0).sum()  # a shift moves the square, all of it stays inside


def test_counting_expert_counts_guided_rows_twice():
    class Echo:
        def velocity(self, x, t, y, g):
            return x

    counter = CountingExpert(Echo())
    x = np.zeros((4, 1, 32, 32), np.float32)
    counter(x, np.zeros(4, np.float32), np.zeros(4, np.int64), np.array([1, 1, 2, 3], np.float32))
    assert counter.forwards == 6


def test_write_report_writes_metrics_grid_and_plot(tmp_path):
    from ddm.ops.eval.evaluate import write_report

    x = np.random.default_rng(0).uniform(-1, 1, (20, 1, 32, 32)).astype(np.float32)
    labels = np.repeat(np.arange(10), 2)
    metrics = {"strategy": "top1", "accuracy": 0.5, "fd": 1.25, "per_class_accuracy": [0.5] * 10}
    write_report(tmp_path, x, labels, metrics)
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    for name in ("samples.png", "per_class_accuracy.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
