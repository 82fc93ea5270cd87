"""--by values: "labels:0-4,5-9" | "kmeans:K" | "random:K" | "all", parsed into a PartitionSpec."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES
from ddm.schema.partition import METHODS, check_label_groups

_BY_EXAMPLE = "'labels:0-4,5-9', 'labels:0+2+4-6,1+3+7-9', 'kmeans:4', 'random:4' or 'all'"


@dataclass(frozen=True)
class PartitionSpec:
    """A parsed --by value. groups is set for method "labels" only."""

    method: str  # "labels" | "kmeans" | "random" | "all"
    k: int
    groups: tuple[tuple[int, ...], ...] | None = None


def parse_label_groups(text: str, num_classes: int = NUM_CLASSES) -> list[list[int]]:
    """'0-4,5-9' -> [[0..4], [5..9]]; '0+2+4-6,1+3+7-9' -> [[0,2,4,5,6], [1,3,7,8,9]].

    Groups are separated by ',', items inside a group by '+', an item is a label or a range 'a-b'.
    Every label 0..num_classes-1 (the dataset's classes: 0..9 for MNIST) must appear exactly once.
    """
    groups: list[list[int]] = []
    for group_text in text.split(","):
        group: list[int] = []
        for item in group_text.split("+"):
            item = item.strip()
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
            if m is None:
                raise ConfigError(expected(f"label groups like {_BY_EXAMPLE}", f"'{item}' in '{text}'"))
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) is not None else lo
            if hi < lo:
                raise ConfigError(expected("a range a-b with a <= b", item))
            group.extend(range(lo, hi + 1))
        groups.append(group)
    check_label_groups(groups, num_classes)
    return groups


def parse_by(spec: str, num_classes: int = NUM_CLASSES) -> PartitionSpec:
    """Parse a --by value: 'labels:0-4,5-9' | 'kmeans:K' | 'random:K' | 'all'; labels of a dataset of
    num_classes classes (10 for MNIST)."""
    text = spec.strip() if isinstance(spec, str) else ""
    if text == "all":
        return PartitionSpec("all", 1, (tuple(range(num_classes)),))
    method, sep, arg = text.partition(":")
    if not sep or method not in METHODS:
        raise ConfigError(expected(f"a partition like {_BY_EXAMPLE}", spec))
    if method == "labels":
        groups = parse_label_groups(arg, num_classes)
        return PartitionSpec("labels", len(groups), tuple(tuple(g) for g in groups))
    if not re.fullmatch(r"\d+", arg.strip()) or int(arg) < 1:
        raise ConfigError(expected(f"{method}:K with an integer K >= 1, e.g. {method}:4", spec))
    return PartitionSpec(method, int(arg))


def format_labels(labels: tuple[int, ...]) -> str:
    """(0, 1, 2, 4, 5) -> '0-2+4-5' (the --by syntax for one group)."""
    parts, run = [], []
    for x in sorted(labels):
        if run and x == run[-1] + 1:
            run.append(x)
        else:
            if run:
                parts.append(run)
            run = [x]
    if run:
        parts.append(run)
    return "+".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in parts)
