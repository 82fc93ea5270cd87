"""`ddm eval` runs side by side: one Markdown table from their metrics.json files.

    ddm eval --compare ensemble=runs/eval_ddm/metrics.json \\
        student=runs/student/eval/metrics.json monolith=runs/eval_mono/metrics.json

NAME=PATH names a row; a bare PATH is named by its folder. Columns: strategy, class accuracy, FD with
its bootstrap standard error over images, FD real vs real (the floor), expert forward passes and
milliseconds per image. Rows measured differently (n, Euler steps, guidance, real split) are compared
anyway, with a note under the table saying how they differ.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ddm.schema.documents import read_document
from ddm.schema.errors import ConfigError, expected

REQUIRED = ("strategy", "accuracy", "fd", "fd_real_vs_real", "forward_passes_per_image", "seconds_per_image")
# what must match for rows to compare like for like (FD needs one classifier's features)
SETTINGS = ("n", "steps", "guidance", "real_split", "classifier_sha256")
HEADER = (
    "| name | strategy | class accuracy | FD (± bootstrap se) | FD real vs real "
    "| forward passes / image | ms / image |\n"
    "|---|---|---:|---:|---:|---:|---:|"
)


def read_metrics(path: str | Path) -> dict:
    """A metrics.json that `ddm eval` wrote, with the fields the table needs (ConfigError otherwise)."""
    path = Path(path)
    metrics = read_document(path, "a metrics.json written by `ddm eval`")
    missing = [k for k in REQUIRED if not isinstance(metrics, dict) or k not in metrics]
    if missing:
        raise ConfigError(
            f"{path}: {expected(f'the ddm eval fields {list(REQUIRED)}', f'a file without {missing}')}"
        )
    return metrics


def parse_item(item: str) -> tuple[str, Path]:
    """'NAME=PATH' -> (NAME, PATH); a bare PATH is named by its folder (runs/student/eval -> eval)."""
    name, sep, path = item.partition("=")
    if not sep:
        return Path(item).parent.name or item, Path(item)
    if not name or not path:
        raise ConfigError(expected("NAME=path/to/metrics.json", item))
    return name, Path(path)


def _num(value, digits: int) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def row(name: str, m: dict) -> str:
    fd = _num(m["fd"], 2)
    if isinstance(m.get("fd_se"), int | float):
        fd += f" ± {_num(m['fd_se'], 2)}"
    cells = [
        name,
        str(m["strategy"]),
        _num(m["accuracy"], 3),
        fd,
        _num(m["fd_real_vs_real"], 2),
        _num(m["forward_passes_per_image"], 0),
        _num(m["seconds_per_image"] * 1000.0, 1),
    ]
    return "| " + " | ".join(cells) + " |"


def differences(runs: list[tuple[str, dict]]) -> list[str]:
    """One line per setting on which the rows differ: 'steps: ensemble 50, student 25'."""
    notes = []
    for key in SETTINGS:
        values = [m.get(key) for _, m in runs]
        if len({json.dumps(v) for v in values}) > 1:
            notes.append(
                f"{key}: " + ", ".join(f"{name} {v}" for (name, _), v in zip(runs, values, strict=True))
            )
    return notes


def table(runs: list[tuple[str, dict]]) -> str:
    """The Markdown table of (name, metrics) rows, and a note on settings that differ between rows."""
    lines = [HEADER, *(row(name, m) for name, m in runs)]
    notes = differences(runs)
    if notes:
        lines += ["", "Not measured alike: " + "; ".join(notes) + "."]
    return "\n".join(lines)


def compare_table(items: list[str]) -> str:
    """The table of NAME=PATH items (ConfigError naming a bad one)."""
    return table([(name, read_metrics(path)) for name, path in map(parse_item, items)])
