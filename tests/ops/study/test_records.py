"""records.py turns one seed's run folder into small committed records, or says what is missing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from ddm.client.images import save_grid
from ddm.ops.study.records import CASES, ROWS, main, read_study, write_records
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError

BY_T = {"t_mid": [0.25, 0.75], "accuracy": [0.6, 0.9]}


def fake_run(run, seed=3, eval_seed=None):
    """A study.sh seed folder: expert and router metas, and per row metrics.json and an 8x10 samples.png
    whose first row is white and the rest black (what evaluate.py writes, with save_grid)."""
    for case, k, _ in CASES:
        for e in range(k):
            meta = {"kind": "expert", "framework": "torch", "config": {}, "expert": e, "batch": 64 // k}
            meta |= {"label_counts": [100 * (e + 1)] * 10, "steps": 2000, "final_loss": 0.1 + e}
            write_meta(
                run / case / f"expert{e}",
                meta | {"wall_time_s": 300.0, "train": {"steps": 2000, "seed": seed}},
            )
        if k > 1:
            router = {"kind": "router", "framework": "jax", "config": {}, "partition": {}, "steps": 1000}
            write_meta(
                run / case / "router", router | {"wall_time_s": 50.0, "accuracy_by_t": {"with label y": BY_T}}
            )
    x = -np.ones((80, 1, 32, 32), np.float32)
    x[:10] = 1.0
    for i, row in enumerate(ROWS):
        (run / "eval" / row).mkdir(parents=True)
        metrics = {
            "accuracy": 0.8,
            "fd": 40.0 + i,
            "fd_se": 0.5,
            "seed": seed if eval_seed is None else eval_seed,
        }
        (run / "eval" / row / "metrics.json").write_text(json.dumps(metrics, indent=1))
        save_grid(x, run / "eval" / row / "samples.png", cols=10)


def test_records_keep_metrics_as_is_experts_routers_and_the_first_samples_row(tmp_path):
    fake_run(tmp_path / "run")
    assert write_records(tmp_path / "run", tmp_path / "rec") == []
    row = "fashion_kmeans4_topk2"
    src = (tmp_path / "run" / "eval" / row / "metrics.json").read_text()
    assert (tmp_path / "rec" / "eval" / f"{row}.json").read_text() == src
    experts = json.loads((tmp_path / "rec" / "experts.json").read_text())
    assert experts["seed"] == 3
    assert [x["expert"] for x in experts["cases"]["fashion_kmeans4"]] == [0, 1, 2, 3]
    assert experts["cases"]["fashion_kmeans4"][2] == {
        **{"expert": 2, "samples": 3000, "label_counts": [300] * 10, "batch": 16, "final_loss": 2.1},
        **{"wall_time_s": 300.0, "steps": 2000, "seed": 3},
    }
    routers = json.loads((tmp_path / "rec" / "routers.json").read_text())["cases"]
    assert sorted(routers) == ["fashion_kmeans2", "fashion_kmeans4", "fashion_random2"]
    assert routers["fashion_random2"]["accuracy_by_t"] == {"with label y": BY_T}
    assert routers["fashion_random2"]["wall_time_s"] == 50.0

    png = tmp_path / "rec" / "samples" / f"{row}.png"
    big = Image.open(tmp_path / "run" / "eval" / row / "samples.png")
    small = np.asarray(Image.open(png))
    assert small.shape[1] == big.width and small.shape[0] < big.height / 7
    assert small.max() == 255 and small.min() > 0  # the white first row, none of the black rows
    assert png.stat().st_size < 50_000
    (tmp_path / "study").mkdir()
    (tmp_path / "rec").rename(tmp_path / "study" / "seed3")
    [record] = read_study(tmp_path / "study")
    assert record.seed == 3 and set(record.evals) == set(ROWS) and record.samples(row) is not None


def test_a_missing_eval_row_fails_before_anything_is_written(tmp_path):
    fake_run(tmp_path / "run")
    (tmp_path / "run" / "eval" / "fashion_kmeans4_full" / "metrics.json").unlink()
    with pytest.raises(ConfigError, match="expected a finished study seed") as err:
        write_records(tmp_path / "run", tmp_path / "rec")
    assert "fashion_kmeans4_full/metrics.json" in str(err.value)
    assert not (tmp_path / "rec").exists()


def test_allow_missing_writes_what_exists_and_says_what_is_missing(tmp_path, capsys):
    fake_run(tmp_path / "run")
    (tmp_path / "run" / "eval" / "fashion_random2_full" / "metrics.json").unlink()
    assert main([str(tmp_path / "run"), str(tmp_path / "rec"), "--allow-missing"]) == 0
    out = capsys.readouterr().out
    assert "missing: " in out and "fashion_random2_full/metrics.json" in out and "7 eval rows" in out
    assert not (tmp_path / "rec" / "eval" / "fashion_random2_full.json").exists()
    assert (tmp_path / "rec" / "eval" / "fashion_random2_top1.json").exists()


def test_an_unfinished_expert_or_mixed_seeds_are_refused(tmp_path):
    fake_run(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "fashion_mono" / "expert0" / "meta.json").read_text())
    write_meta(tmp_path / "a" / "fashion_mono" / "expert0", meta | {"steps": 1500})
    with pytest.raises(ConfigError, match="trained 1500 of 2000 steps"):
        write_records(tmp_path / "a", tmp_path / "rec")
    fake_run(tmp_path / "b", seed=1, eval_seed=2)
    with pytest.raises(ConfigError, match=r"one training/sampling seed.*\[1, 2\]"):
        write_records(tmp_path / "b", tmp_path / "rec")
