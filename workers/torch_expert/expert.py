"""PyTorch expert on cpu, cuda, or AWS Trainium (neuron).

- cpu / cuda: eager forward, any batch size.
- neuron: the model is compiled ahead of time with torch_neuronx.trace once per batch bucket (Neuron
  needs static shapes); inputs are padded to the next bucket. ONLY THE `torch_neuronx.trace` CALL
  AND THE EXECUTION OF ITS RESULT NEED TRAINIUM; it has not been run in this repository's CI.
- cpu-traced: the same bucketed path with torch.jit.trace standing in for the Neuron compiler, so
  the padding, per-bucket dispatch and warm-up code that Trainium uses is tested on any CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ddm.schema.errors import DeviceError
from ddm.workers.checkpoint import config_of
from ddm.workers.expert import DEFAULT_BUCKETS, Expert, ExpertMeta
from ddm.workers.torch_expert.checkpoint import load_weights
from ddm.workers.torch_expert.unet import UNet

DEVICES = ("auto", "cpu", "cuda", "neuron", "cpu-traced")
NEURON_INSTALL_HINT = (
    "torch-neuronx is not importable. It is not on PyPI: on a Trainium (trn1/trn2) or Inferentia2 host "
    "install it from AWS's Neuron package index, e.g. "
    "`pip install --extra-index-url https://pip.repos.neuron.amazonaws.com torch-neuronx neuronx-cc`, "
    "or use an AWS Neuron Deep Learning AMI / container (see docs in ops/ and the Neuron SDK setup guide)."
)


def import_torch_neuronx():
    """Import torch_neuronx or fail at once with how to install it."""
    try:
        import torch_neuronx  # noqa: PLC0415 - optional, Trainium hosts only
    except ImportError as exc:
        raise DeviceError(NEURON_INSTALL_HINT) from exc
    return torch_neuronx


def resolve_device(device: str) -> str:
    if device not in DEVICES:
        raise DeviceError(f"expected a torch device in {DEVICES}, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError("expected a CUDA GPU for --device cuda, but torch.cuda.is_available() is False")
    if device == "neuron":
        import_torch_neuronx()
    return device


class TorchExpert(Expert):
    def __init__(self, model: UNet, meta: ExpertMeta, buckets: tuple[int, ...] = DEFAULT_BUCKETS):
        self.meta = meta
        device = meta.device
        model = model.eval().requires_grad_(False)
        self._compiled: dict[int, Callable] = {}
        if device in ("neuron", "cpu-traced"):
            self.buckets = tuple(sorted(buckets))
            compile_fn = _neuron_compiler() if device == "neuron" else _jit_trace
            for b in self.buckets:  # every bucket compiled before the first request
                example = (torch.zeros(b, 1, 32, 32), torch.zeros(b), torch.zeros(b, dtype=torch.int64))
                self._compiled[b] = compile_fn(model, example)
            self._device = torch.device("cpu")  # Neuron executables take host tensors
        else:
            self.buckets = None
            self._device = torch.device(device)
            self._model = model.to(self._device)

    def _forward(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        d = self._device
        xs, ts, ys = torch.from_numpy(x).to(d), torch.from_numpy(t).to(d), torch.from_numpy(y).to(d)
        with torch.inference_mode():
            fn = self._compiled[len(x)] if self.buckets else self._model
            return fn(xs, ts, ys).float().cpu().numpy()


def _jit_trace(model: UNet, example: tuple) -> Callable:
    return torch.jit.trace(model, example, check_trace=False)


def _neuron_compiler() -> Callable:
    torch_neuronx = import_torch_neuronx()

    def compile_fn(model: UNet, example: tuple) -> Callable:  # runs on Trainium/Inferentia2 only
        return torch_neuronx.trace(model, example)

    return compile_fn


def load(path: str | Path, meta: dict, device: str = "auto", buckets=DEFAULT_BUCKETS) -> TorchExpert:
    device = resolve_device(device)
    model = UNet(config_of(meta))
    state = {k: torch.from_numpy(v) for k, v in load_weights(Path(path)).items()}
    model.load_state_dict(state)
    return TorchExpert(model, ExpertMeta.from_json(meta, device, str(path)), buckets)
