"""The study's tables come from the eval folders; missing cases say "not run" instead of vanishing."""

from __future__ import annotations

import json

from ddm.ops.study.tables import table, training_table
from ddm.schema.checkpoint_meta import write_meta


def test_tables_read_metrics_router_accuracy_and_training_meta(tmp_path):
    metrics = {"accuracy": 0.9123, "fd": 12.34, "fd_real_vs_real": 5.6, "forward_passes_per_image": 50.0}
    metrics["seconds_per_image"] = 0.0421
    (tmp_path / "eval" / "fashion_kmeans2_top1").mkdir(parents=True)
    (tmp_path / "eval" / "fashion_kmeans2_top1" / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "fashion_kmeans2" / "router").mkdir(parents=True)
    by_t = {"t_mid": [0.05, 0.45, 0.55], "accuracy": [0.5, 0.8, 0.9]}
    router = {
        **{"kind": "router", "framework": "jax", "config": {}, "partition": {}},
        "accuracy_by_t": {"unconditional (y = null)": by_t, "with label y": {**by_t, "accuracy": [1, 1, 1]}},
    }
    write_meta(tmp_path / "fashion_kmeans2" / "router", router)
    meta = {"framework": "torch", "config": {}, "expert": 1, "label_counts": [10, 20], "batch": 32}
    write_meta(tmp_path / "fashion_kmeans2" / "expert1", {**meta, "final_loss": 0.18, "wall_time_s": 380.4})

    text = table(tmp_path)
    assert "| Fashion-MNIST k-means K=2 | top1 | 0.912 | 12.3 (5.6) | 50 | 0.042 | 0.90 / 1.00 |" in text
    assert "| Fashion-MNIST k-means K=2 | full | not run |" in text
    assert "| Fashion-MNIST k-means K=2 | 1 | 30 | 32 | 0.1800 | 380 |" in training_table(tmp_path)
