"""The study tables from records of several seeds: intervals across seeds, the n=1 path, the paired
FD(DDM) - FD(monolith) table, "not run" for rows no seed has, the compute, and the figures."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from ddm.ops.study.records import read_study
from ddm.ops.study.tables import (
    compute_table,
    main,
    main_table,
    paired_table,
    strategy_table,
    training_table,
)

# FD per seed 0, 1, 2 (kmeans4 full only in seeds 0 and 1; kmeans4 topk2 in none)
FD = {
    "fashion_mono_top1": [40.0, 42.0, 44.0],
    "fashion_kmeans2_top1": [38.0, 43.0, 41.0],
    "fashion_kmeans2_full": [45.0, 46.0, 47.0],
    "fashion_random2_top1": [50.0, 52.0, 54.0],
    "fashion_random2_full": [41.0, 42.0, 43.0],
    "fashion_kmeans4_top1": [39.0, 40.0, 41.0],
    "fashion_kmeans4_full": [30.0, 33.0],
}
ACCURACY = [0.80, 0.82, 0.84]
BY_T = {"t_mid": [0.25, 0.55, 0.85], "accuracy": [0.5, 0.7, 0.9]}


def write_seed(root, seed):
    folder = root / f"seed{seed}"
    (folder / "eval").mkdir(parents=True)
    (folder / "samples").mkdir()
    for row, fds in FD.items():
        if seed >= len(fds):
            continue
        metrics = {"fd": fds[seed], "fd_se": 0.5 + 0.1 * seed, "accuracy": ACCURACY[seed], "seed": seed}
        metrics |= {"fd_ci95": [fds[seed] - 1.0, fds[seed] + 1.0], "fd_real_vs_real": 3.0 + seed}
        metrics |= {"forward_passes_per_image": 50.0, "seconds_per_image": 0.04}
        (folder / "eval" / f"{row}.json").write_text(json.dumps(metrics))
        Image.fromarray(np.full((103, 1026), 30 * seed + 20, np.uint8)).save(
            folder / "samples" / f"{row}.png"
        )
    mono = {"expert": 0, "samples": 60000, "batch": 64, "final_loss": 0.10 + 0.01 * seed, "steps": 2000}
    experts = {"fashion_mono": [mono]}
    experts["fashion_kmeans2"] = [
        {"expert": e, "samples": 30000 + e, "batch": 32, "final_loss": 0.2, "steps": 2000}
        | {"wall_time_s": 300.0 + 30 * seed}
        for e in range(2)
    ]
    (folder / "experts.json").write_text(json.dumps({"seed": seed, "cases": experts}))
    by_t = {
        "unconditional (y = null)": BY_T,
        "with label y": {**BY_T, "accuracy": [1, 1, 0.96 + 0.02 * seed]},
    }
    routers = {"fashion_kmeans2": {"accuracy_by_t": by_t, "wall_time_s": 50.0, "steps": 1000}}
    (folder / "routers.json").write_text(json.dumps({"seed": seed, "cases": routers}))


def study_of(tmp_path, seeds=(0, 1, 2)):
    for seed in seeds:
        write_seed(tmp_path / "study", seed)
    return read_study(tmp_path / "study")


def test_main_table_intervals_across_seeds_by_hand(tmp_path):
    text = main_table(study_of(tmp_path))
    # mono: FD 40, 42, 44: sd 2, half 4.303 * 2 / sqrt(3) = 4.97; accuracy sd 0.02: half 0.0497
    assert (
        "| monolith | - | 3 | 0.820 ± 0.050 | 42.0 ± 5.0 | 40.0±0.5, 42.0±0.6, 44.0±0.7 "
        "| 4.0 | 50 | 0.040 | - |" in text
    )
    # kmeans4 full, seeds 0 and 1: FD 30, 33: sd 2.121, half 12.706 * 2.121 / sqrt(2) = 19.06
    assert "| k-means K=4 | full | 2 (seed 0, 1) | 0.810 ± 0.127 | 31.5 ± 19.1 | 30.0±0.5, 33.0±0.6 |" in text
    assert "| k-means K=4 | top2 | not run | | | | | | | |" in text
    # kmeans2 top1: FD 38, 43, 41: mean 40.67, sd 2.517, half 4.303 * 2.517 / sqrt(3) = 6.25
    assert "| k-means K=2 | top1 | 3 | 0.820 ± 0.050 | 40.7 ± 6.3 | 38.0±0.5, 43.0±0.6, 41.0±0.7 |" in text
    # router: worst over t >= 0.5 per seed (no label 0.7; label 0.96, 0.98, 1.0), mean over seeds
    assert "| 4.0 | 50 | 0.040 | 0.70 / 0.98 |" in text
    assert "| k-means K=2 | full (= top2) | 3 |" in text
    assert "nan" not in text


def test_paired_table_differences_by_seed_and_sign_count(tmp_path):
    text = paired_table(study_of(tmp_path))
    # kmeans2 top1 - mono: -2, +1, -3: mean -1.33, sd 2.082, half 4.303 * 2.082 / sqrt(3) = 5.17
    assert "| k-means K=2 | top1 | 3 | -1.3 ± 5.2 | 2 of 3 |" in text
    # kmeans2 full - mono: 5, 4, 3: sd 1, half 4.303 / sqrt(3) = 2.48; random2 full: 1, 0, -1
    assert "| k-means K=2 | full (= top2) | 3 | +4.0 ± 2.5 | 0 of 3 |" in text
    assert "| random shards K=2 | full (= top2) | 3 | +0.0 ± 2.5 | 1 of 3 |" in text
    # kmeans4 full - mono, seeds 0 and 1 only: -10, -9: sd 0.7071, half 12.706 * 0.7071 / sqrt(2) = 6.35
    assert "| k-means K=4 | full | 2 | -9.5 ± 6.4 | 2 of 2 |" in text
    assert "| k-means K=4 | top2 | 0 | not run | - |" in text


def test_training_table_mean_and_sd_over_seeds(tmp_path):
    text = training_table(study_of(tmp_path))
    assert "| monolith | 0 | 60000 | 64 | 0.1100 ± 0.0100 | - | 3 |" in text
    assert "| k-means K=2 | 1 | 30001 | 32 | 0.2000 ± 0.0000 | 330 | 3 |" in text
    assert "| k-means K=4 | 3 | not run | | | | |" in text


def test_strategy_table_pairs_top1_with_the_other_strategies_by_seed(tmp_path):
    text = strategy_table(study_of(tmp_path))
    # K=2 top1 - full per seed: -7, -3, -6 -> mean -5.333, sd 2.082, t(2) 4.303 -> +-5.2
    assert "| k-means K=2 | full (= top2) | 3 | -5.3 ± 5.2 | 3 of 3 |" in text
    # K=4: full only in seeds 0 and 1 (9, 7 -> 8 ± 12.706 * 1.414 / 1.414 = 12.7); top2 in none
    assert "| k-means K=4 | full | 2 | +8.0 ± 12.7 | 0 of 2 |" in text
    assert "| k-means K=4 | top2 | 0 | not run | - |" in text


def test_compute_table_sums_each_seeds_wall_times(tmp_path):
    text = compute_table(study_of(tmp_path, seeds=(0, 1)))
    # seed 1: two experts of 330 s, one router of 50 s, no eval wall_s in these records
    assert "| 1 | 0.18 | 0.01 | 0.00 | 0.20 |" in text
    assert "| all | 0.35 | 0.03 | 0.00 | 0.38 |" in text  # 1260 s, 100 s of 3600


def test_one_seed_says_n1_and_shows_the_bootstrap_interval(tmp_path):
    study = study_of(tmp_path, seeds=(0,))
    text = main_table(study) + paired_table(study) + training_table(study)
    assert "| monolith | - | 1 | 0.800 (n=1) | 40.0 (n=1; bootstrap 95% over images [39.0, 41.0]) |" in text
    # the paired difference's bootstrap: 1.96 * sqrt(0.5^2 + 0.5^2) = 1.39
    assert "| k-means K=2 | top1 | 1 | -2.0 (n=1; bootstrap 95% over images [-3.4, -0.6]) | 1 of 1 |" in text
    assert "| monolith | 0 | 60000 | 64 | 0.1000 (n=1) | - | 1 |" in text
    assert "nan" not in text.lower()


def test_main_prints_the_tables_and_writes_the_figures(tmp_path, capsys):
    study_of(tmp_path, seeds=(1, 2))
    argv = [str(tmp_path / "study"), "--steps", "1500", "--preset", "tiny", "--batch", "64"]
    assert main([*argv, "--out-img", str(tmp_path / "img")]) == 0
    out = capsys.readouterr().out
    assert "preset tiny, 1500 steps, monolith batch 64; seeds 1, 2." in out
    assert "| k-means K=4 | top1 | 2 |" in out and "| k-means K=4 | full | 1 (seed 1) |" in out
    for name in ("study_fd_by_strategy.png", "study_paired.png", "study_samples.png"):
        assert Image.open(tmp_path / "img" / name).size[0] > 500
    assert "Note: the records' experts trained [2000] steps, not 1500." in out


def test_without_flags_the_header_says_what_the_records_say_not_none(tmp_path):
    """The study tables printed "preset None, None steps, monolith batch None" (issue 40 part 7)."""
    from ddm.ops.study.tables import header

    study = study_of(tmp_path, seeds=(1,))
    text = header(study, None, None, None)
    assert text == "Fashion-MNIST study: 2000 steps (as recorded); seeds 1." and "None" not in text
