"""Numeric precision an expert serves at: one name per choice, shared by the deployment file, the
worker's flags, heartbeats, replies and frames.

    fp32  float32 everywhere (CUDA: TF32 turned off for matmuls and convolutions; Neuron: --auto-cast=none)
    tf32  CUDA on Ampere or newer: float32 tensors, TF32 matmuls and convolutions (about 1e-3 relative);
          Neuron: matmuls cast to tf32
    bf16  bfloat16 compute (autocast on CPU and CUDA; Neuron: --auto-cast=all --auto-cast-type=bf16)
"""

from __future__ import annotations

from ddm.schema.errors import ConfigError, expected

PRECISIONS = ("fp32", "tf32", "bf16")
DEFAULT_PRECISION = "fp32"


def check_precision(value: object, where: str = "precision") -> str:
    """value if it names a precision, else a ConfigError saying which ones exist."""
    if value not in PRECISIONS:
        choices = ", ".join(PRECISIONS)
        raise ConfigError(f"{where}: {expected(f'one of {choices}', value)}")
    return value
