"""Routing strategies: the text a job carries, parsed once into a typed value, and the one rule for
which strategies a deployment accepts.

    'oracle'  the label -> expert table of a label partition (no router network)
    'top1'    the router's most probable expert (spelled 'topk:1' too)
    'topk:K'  the K most probable experts, weights renormalised
    'full'    every expert, weighted by the router's probabilities
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .errors import SchemaError, expected

_TOPK_RE = re.compile(r"topk:([1-9][0-9]{0,3})")
SYNTAX = "strategy 'oracle', 'top1', 'topk:K' (K >= 1) or 'full'"


@dataclass(frozen=True)
class Strategy:
    """A parsed strategy: kind 'oracle' | 'topk' | 'full', and k for 'topk'."""

    kind: Literal["oracle", "topk", "full"]
    k: int | None = None

    @classmethod
    def parse(cls, text: object) -> Strategy:
        """Strategy text -> Strategy; SchemaError for anything else."""
        if not isinstance(text, str):
            raise SchemaError(expected("strategy as a str", type(text).__name__))
        if text in ("oracle", "full"):
            return cls(text)
        if text == "top1":
            return cls("topk", 1)
        m = _TOPK_RE.fullmatch(text)
        if m is None:
            raise SchemaError(expected(SYNTAX, text))
        return cls("topk", int(m.group(1)))

    @property
    def mixes(self) -> bool:
        """Whether the strategy mixes several experts (full, topk:K with K >= 2): when one of them has no
        live worker it renormalises over the live ones; oracle and top1 wait for that expert instead."""
        return self.kind == "full" or (self.kind == "topk" and (self.k or 0) >= 2)

    def describe(self) -> str:
        """What the strategy does, in a sentence (the web UI's hint under its menu, `--help`)."""
        if self.kind == "oracle":
            return "label → expert table of the label split: each label goes to the expert trained on it"
        if self.kind == "full":
            return "every expert, weighted by the router's probabilities"
        if self.k == 1:
            return "the router's most likely expert for each image, at every step"
        return f"the router's {self.k} most likely experts, weights renormalised"

    def __str__(self) -> str:
        """The canonical spelling ('top1' for topk:1): what descriptors list and job hashes record."""
        if self.kind == "topk":
            return "top1" if self.k == 1 else f"topk:{self.k}"
        return self.kind


def accepted_strategies(num_experts: int, has_oracle: bool) -> tuple[str, ...]:
    """Every strategy a deployment of `num_experts` experts can route, canonical and in menu order:
    oracle (label partitions only), top1, topk:2 .. topk:K, full."""
    topk = tuple(str(Strategy("topk", k)) for k in range(1, num_experts + 1))
    return (("oracle",) if has_oracle else ()) + topk + ("full",)


def default_strategy(has_oracle: bool) -> str:
    """What a job that names no strategy gets when its deployment does not say: the oracle where the
    labels name the expert, else the router's top expert (the DDM paper's best on ImageNet)."""
    return "oracle" if has_oracle else "top1"
