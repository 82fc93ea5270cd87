"""The comparison table of `ddm eval` runs (`ddm eval --compare`, ddm.ops.eval.compare) on fixture metrics."""

from __future__ import annotations

import json

import pytest

from ddm.ops.cli import main
from ddm.ops.eval.compare import parse_item, read_metrics, table
from ddm.schema.errors import ConfigError


def metrics(**changes) -> dict:
    """A metrics.json as `ddm eval` writes it (the fields the table reads, and a few more)."""
    base = {
        "deployment": "checkpoints/mnist/deployment.toml",
        "strategy": "top1",
        "steps": 50,
        "guidance": 2.0,
        "n": 1000,
        "seed": 0,
        "real_split": "test[8000:]",
        "accuracy": 0.9613,
        "per_class_accuracy": [0.96] * 10,
        "fd": 12.3456,
        "fd_se": 0.4321,
        "fd_ci95": [11.5, 13.2],
        "fd_real_vs_real": 1.234,
        "forward_passes_per_image": 100.0,
        "seconds_per_image": 0.0351,
        "wall_s": 35.1,
    }
    return {**base, **changes}


def write(folder, m: dict):
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(m))
    return folder / "metrics.json"


def test_one_row_per_run_with_fd_se_and_ms(tmp_path, capsys):
    ens = write(tmp_path / "eval_ddm", metrics())
    stu = write(tmp_path / "student" / "eval", metrics(strategy="oracle", accuracy=0.9, fd=20.0, fd_se=1.0))
    mono = write(
        tmp_path / "mono", {k: v for k, v in metrics(fd=15.0).items() if k not in ("fd_se", "fd_ci95")}
    )
    assert main(["eval", "--compare", f"ensemble={ens}", f"student={stu}", str(mono)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("| name | strategy | class accuracy | FD (± bootstrap se) | FD real vs real")
    assert lines[2] == "| ensemble | top1 | 0.961 | 12.35 ± 0.43 | 1.23 | 100 | 35.1 |"
    assert lines[3] == "| student | oracle | 0.900 | 20.00 ± 1.00 | 1.23 | 100 | 35.1 |"
    assert lines[4] == "| mono | top1 | 0.961 | 15.00 | 1.23 | 100 | 35.1 |"  # old metrics: no se, no ±
    assert len(lines) == 5  # measured alike: no note


def test_a_note_says_where_runs_were_measured_differently():
    runs = [("ensemble", metrics()), ("student", metrics(steps=25, guidance=1.0))]
    text = table(runs)
    assert text.splitlines()[-1] == (
        "Not measured alike: steps: ensemble 50, student 25; guidance: ensemble 2.0, student 1.0."
    )


def test_bad_input_fails_clearly(tmp_path, capsys):
    with pytest.raises(ConfigError, match="not found"):
        read_metrics(tmp_path / "none.json")
    bad = write(tmp_path / "bad", {"strategy": "top1", "accuracy": 0.5})
    with pytest.raises(ConfigError, match="without \\['fd', 'fd_real_vs_real'"):
        read_metrics(bad)
    with pytest.raises(ConfigError, match="NAME=path/to/metrics.json"):
        parse_item("=x.json")
    assert parse_item("runs/student/eval/metrics.json")[0] == "eval"
    assert main(["eval", "--compare", f"a={tmp_path / 'none.json'}"]) == 2
    assert "ddm eval: error: expected a metrics.json" in capsys.readouterr().err
    assert main(["eval", "--compare", str(bad), "--json"]) == 2
    assert "--compare prints a Markdown table" in capsys.readouterr().err
    for argv in (["eval", "--n", "1"], ["eval", "--out", str(tmp_path), "--compare", str(bad)]):
        with pytest.raises(SystemExit) as exc:  # argparse: exactly one of --out and --compare
            main(argv)
        assert exc.value.code == 2
        assert "--out" in capsys.readouterr().err
