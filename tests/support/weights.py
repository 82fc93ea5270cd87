"""Random weights for parity tests: every parameter of a torch model drawn afresh (init leaves output
layers at zero, which would hide bugs), keeping activations O(1) through the net."""

from __future__ import annotations

import math

import torch


def randomize_(model: torch.nn.Module, seed: int, unit: str) -> torch.nn.Module:
    """In place: matrices ~ N(0, 1/fan_in), norm scales near 1, the rest small; a matrix whose name
    starts with `unit` (an embedding table or the text Linear) ~ N(0, 1), so it moves the conditioning
    by O(1). Returns the model."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.startswith(unit) and p.ndim >= 2:
                p.copy_(noise)
            elif p.ndim >= 2:
                p.copy_(noise / math.sqrt(p[0].numel()))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            else:
                p.copy_(0.1 * noise)
    return model
