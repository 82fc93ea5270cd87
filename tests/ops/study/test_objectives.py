"""The emoji objectives study's table (ops/study/objectives.py): means with t-intervals across seeds and
the paired mixed - velocity difference, from records laid out as ops/study/emoji.sh writes them."""

from __future__ import annotations

import json

import pytest

from ddm.ops.study.objectives import read_rows, table
from ddm.schema.errors import ConfigError


def write(root, seed, row, accuracy, fd):
    folder = root / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{row}.json").write_text(json.dumps({"seed": seed, "accuracy": accuracy, "fd": fd}))


def test_the_table_pairs_each_seed_and_says_what_did_not_run(tmp_path):
    for seed, (velocity, mixed) in enumerate([(0.50, 0.40), (0.60, 0.52), (0.55, 0.45)]):
        write(tmp_path, seed, "velocity_top1", velocity, 100.0 + seed)
        write(tmp_path, seed, "mixed_top1", mixed, 110.0 + seed)
    text = table(read_rows(tmp_path))
    lines = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in text.splitlines()[2:]}
    velocity, mixed = lines[("top-1", "velocity", "0,1,2")], lines[("top-1", "mixed", "0,1,2")]
    assert "0.550 ± 0.124" in velocity  # mean 0.55, sd 0.05: 4.303 * 0.05 / sqrt(3)
    # paired: -0.10, -0.08, -0.10 -> mean -0.093 (sd 0.0115: ± 0.029); FD +10 every seed -> ± 0.0
    assert "-0.093 ± 0.029" in mixed and "+10.0 ± 0.0" in mixed
    assert "not run" in lines[("top-2", "mixed", "-")]


def test_no_records_is_an_error_that_names_the_layout(tmp_path):
    with pytest.raises(ConfigError, match=r"seed<S>/<case>_<strategy>.json"):
        read_rows(tmp_path)
