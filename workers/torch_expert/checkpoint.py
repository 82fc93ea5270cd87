"""PyTorch checkpoints: safetensors only (no torch.load, so no pickle)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

from ddm.schema.atomic import atomic_path
from ddm.workers.frameworks import TORCH


def _save_atomic(tensors: dict[str, np.ndarray], path: Path, metadata: dict[str, str] | None = None) -> None:
    with atomic_path(path) as tmp:
        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tmp), metadata=metadata)


def state_to_numpy(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().float().numpy().copy() for k, v in module.state_dict().items()}


def save_weights(folder: Path, canonical: dict[str, np.ndarray]) -> None:
    """Canonical flat layout -> folder/model.safetensors."""
    _save_atomic(canonical, Path(folder) / TORCH.weights_file)


def save_canonical(folder: Path, canonical: dict[str, np.ndarray], config) -> None:
    """The registry's writer (convert, random experts); the canonical layout is every architecture's
    torch state_dict, so `config` is not needed."""
    save_weights(folder, canonical)


def load_weights(folder: Path, architecture=None) -> dict[str, np.ndarray]:
    """folder/model.safetensors -> canonical flat layout (numpy float32). The file holds the canonical
    layout of any architecture, so `architecture` (the registry's argument) is not needed."""
    return dict(load_file(str(Path(folder) / TORCH.weights_file)))


def load_weights_file(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file -> {name: tensor} as stored (any dtype safetensors has, bf16 included: the
    model's load_state_dict casts into its parameters). What an expert loads: ddm.workers.checkpoint's
    weights_path names the file."""
    from safetensors.torch import load_file as load_torch_file

    return load_torch_file(str(path))


def save_train_state(folder: Path, model, ema, optimizer, step: int, wall_s: float) -> None:
    """Raw and EMA weights plus AdamW moments, keyed by parameter name."""
    tensors = {f"model.{k}": v for k, v in state_to_numpy(model).items()}
    tensors.update({f"ema.{k}": v for k, v in state_to_numpy(ema).items()})
    for name, param in model.named_parameters():
        for key, value in optimizer.state.get(param, {}).items():
            tensors[f"opt.{key}.{name}"] = value.detach().cpu().float().numpy().reshape(value.shape)
    meta = {"step": str(step), "wall_s": f"{wall_s:.3f}"}
    _save_atomic(tensors, Path(folder) / TORCH.train_state_file, metadata=meta)


def load_train_state(folder: Path, model, ema, optimizer) -> tuple[int, float]:
    """Restore what save_train_state wrote; returns (step, wall seconds)."""
    from safetensors import safe_open

    path = Path(folder) / TORCH.train_state_file
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata() or {}
    tensors = load_file(str(path))
    prefixed = {"model.": model, "ema.": ema}
    for prefix, module in prefixed.items():
        sd = {k[len(prefix) :]: torch.from_numpy(v) for k, v in tensors.items() if k.startswith(prefix)}
        module.load_state_dict(sd)
    for name, param in model.named_parameters():
        state = {}
        for key in ("step", "exp_avg", "exp_avg_sq"):
            arr = tensors.get(f"opt.{key}.{name}")
            if arr is not None:
                state[key] = torch.from_numpy(arr).to(param.device)
        if state:
            optimizer.state[param] = state
    return int(meta.get("step", 0)), float(meta.get("wall_s", 0.0))
