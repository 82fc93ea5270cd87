"""Ahead-of-time compilation of one batch bucket: torch_neuronx.trace on Trainium/Inferentia2, and
torch.jit.trace as the `cpu-traced` stand-in that runs the same compile, cache and dispatch code on
any CPU. Each tracer states its compiler arguments, which the trace cache keys on.

ONLY THE `torch_neuronx.trace` CALL AND THE EXECUTION OF ITS RESULT NEED TRAINIUM; neither has run in
this repository's CI or on its development machines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ddm.workers.torch_expert.devices import import_torch_neuronx

# neuronx-cc: AWS compiles its diffusion UNets with --model-type=unet-inference; the auto-cast choice is
# explicit, so a newer compiler's default cannot change the numbers (and it is part of the cache key).
NEURON_MODEL_TYPE = "--model-type=unet-inference"
NEURON_AUTO_CAST = {
    "fp32": ("--auto-cast=none",),
    "tf32": ("--auto-cast=matmult", "--auto-cast-type=tf32"),
    "bf16": ("--auto-cast=all", "--auto-cast-type=bf16"),
}


@dataclass(frozen=True)
class Tracer:
    device: str  # neuron | cpu-traced
    compiler_args: tuple[str, ...]
    trace: Callable[[torch.nn.Module, tuple], torch.jit.ScriptModule]


def neuron_compiler_args(precision: str) -> tuple[str, ...]:
    return (NEURON_MODEL_TYPE, *NEURON_AUTO_CAST[precision])


def tracer_for(device: str, precision: str) -> Tracer:
    if device == "neuron":
        torch_neuronx = import_torch_neuronx()
        args = neuron_compiler_args(precision)

        def trace(model, example):  # runs on Trainium/Inferentia2 only
            return torch_neuronx.trace(model, example, compiler_args=list(args))

        return Tracer(device, args, trace)

    def jit_trace(model, example):
        return torch.jit.trace(model, example, check_trace=False)

    return Tracer("cpu-traced", ("torch.jit.trace",), jit_trace)


def example_inputs(
    bucket: int, shape: tuple[int, int, int] = (1, 32, 32), condition: tuple[int, ...] = ()
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Static-shape inputs of one bucket: x [b, C, H, W] (one sample's `shape`: the expert's sample
    space; the legacy 1x32x32 by default), t [b], y [b] int64 (a text expert's: its prompt embeddings
    float32 [b, *condition], ddm.workers.config.condition_shape)."""
    return torch.zeros(bucket, *shape), torch.zeros(bucket), condition_zeros(bucket, condition)


def condition_zeros(bucket: int, condition: tuple[int, ...] = (), device=None) -> torch.Tensor:
    """Zeros of a model's conditioning input: labels int64 [b], or embeddings float32 [b, *condition]."""
    if condition:
        return torch.zeros(bucket, *condition, device=device)
    return torch.zeros(bucket, dtype=torch.int64, device=device)
