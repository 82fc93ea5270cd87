"""A Paris checkpoint's safetensors files: names, shapes and dtypes from the header alone (safe_open,
nothing loaded), checked against the tensors a config makes (config.py); and their tensors loaded.

A mismatch is refused with its lists (missing, unexpected, wrong shape), so that a checkpoint of
another model or another size says what differs before a worker spends minutes loading it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError

SHOWN = 12  # names listed per kind of mismatch; the rest are counted


def tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """name -> shape of every tensor in the safetensors file at `path`, from its header."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
    except (OSError, ValueError) as exc:  # SafetensorError is a ValueError's kin in some versions
        raise ConfigError(f"{path}: not a readable safetensors file: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error type for a bad header
        raise ConfigError(f"{path}: not a readable safetensors file: {type(exc).__name__}: {exc}") from None


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def check_tensors(found: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], what: str) -> None:
    """ConfigError naming the missing, unexpected and wrongly shaped tensors of `what`, if any."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    wrong = sorted(n for n in set(found) & set(expected) if found[n] != expected[n])
    if not (missing or unexpected or wrong):
        return
    lines = [f"{what} does not have the tensors of its architecture:"]
    if missing:
        lines.append(f"  missing ({len(missing)}): {_listed(missing)}")
    if unexpected:
        lines.append(f"  unexpected ({len(unexpected)}): {_listed(unexpected)}")
    if wrong:
        shapes = [f"{n} {list(found[n])} (expected {list(expected[n])})" for n in wrong]
        lines.append(f"  wrong shape ({len(wrong)}): {_listed(shapes)}")
    raise ConfigError("\n".join(lines))


def load_numpy(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of the file as float32 numpy (bf16 and fp16 checkpoints widened through torch)."""
    from safetensors.torch import load_file

    return {name: t.float().numpy() for name, t in load_file(str(path)).items()}
