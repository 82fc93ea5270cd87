"""PyTorch expert on cpu, cuda, or AWS Trainium (neuron).

- cpu: eager forward, any batch size; fp32, or bf16 under autocast.
- cuda: one CUDA graph per batch bucket with pinned staging buffers (workers/torch_expert/cuda_graphs.py);
  inputs are padded to the next bucket. Not run here: the development machines have no GPU.
- neuron: the model is compiled ahead of time with torch_neuronx.trace once per batch bucket (Neuron
  needs static shapes), with explicit compiler arguments, and each traced bucket is saved to and
  loaded from the trace cache (workers/torch_expert/trace_cache.py). ONLY THE `torch_neuronx.trace`
  CALL AND THE EXECUTION OF ITS RESULT NEED TRAINIUM; neither has run in this repository's CI.
- cpu-traced: the same bucketed path with torch.jit.trace standing in for the Neuron compiler, so the
  padding, per-bucket dispatch, trace cache and warm-up code that Trainium uses is tested on any CPU.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.precision import DEFAULT_PRECISION
from ddm.schema.sample_space import LEGACY
from ddm.workers.checkpoint import architecture_of, config_of, weights_path
from ddm.workers.config import condition_shape
from ddm.workers.expert import DEFAULT_BUCKETS, Expert, ExpertMeta
from ddm.workers.memory import check_load
from ddm.workers.torch_expert.checkpoint import load_weights_file
from ddm.workers.torch_expert.devices import check_device_precision, resolve_device, toolchain
from ddm.workers.torch_expert.trace_cache import TraceCache, TraceKey
from ddm.workers.torch_expert.tracing import example_inputs, tracer_for

BucketFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class TorchExpert(Expert):
    """Eager on the CPU (`buckets` None: any batch size), else one compiled callable per bucket."""

    def __init__(
        self, meta: ExpertMeta, model: torch.nn.Module | None, bucket_fns: dict[int, BucketFn] | None = None
    ):
        self.meta = meta
        self._model = model
        self._bucket_fns = bucket_fns or {}
        self.buckets = tuple(sorted(self._bucket_fns)) or None
        bf16 = meta.precision == "bf16" and meta.device == "cpu"
        self._autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def _forward(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """y: labels int64 [b], or a text expert's pooled prompt embeddings float32 [b, text_width]."""
        if self.buckets:
            return self._bucket_fns[len(x)](x, t, y)
        with torch.inference_mode(), self._autocast:
            v = self._model(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(y))
        return v.float().numpy()


def _host_call(module: torch.jit.ScriptModule) -> BucketFn:
    """A traced bucket (Neuron executables take host tensors) as a numpy function."""

    def run(x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(y)).float().numpy()

    return run


def model_identity(model: torch.nn.Module) -> str:
    """The architecture a traced file was made from: the model's config and the sha256 of the source
    file of its class (unet.py: key "unet_py"), so an upgrade that changes either never loads an old
    trace."""
    source = Path(inspect.getsourcefile(type(model)))
    return json.dumps(
        {"config": model.cfg.to_dict(), f"{source.stem}_py": file_sha256(source)}, sort_keys=True
    )


def traced_buckets(
    model: torch.nn.Module,
    device: str,
    precision: str,
    buckets,
    weights_sha256: str,
    cache: TraceCache,
    shape: tuple[int, int, int] = LEGACY.shape,
) -> dict[int, BucketFn]:
    """Every bucket traced (or loaded from the cache) before the first request, at one sample's `shape`
    (the card's sample space; the model identity in the key holds the config that sizes it)."""
    tracer = tracer_for(device, precision)
    versions = tuple(sorted(toolchain(device).items()))
    identity = model_identity(model)
    condition = condition_shape(model.cfg)  # a text expert's y: embeddings [b, *condition]
    fns = {}
    for b in sorted(buckets):
        key = TraceKey(weights_sha256, identity, b, device, versions, tracer.compiler_args)
        example = example_inputs(b, shape, condition)
        fns[b] = _host_call(cache.get(key, lambda b=b, example=example: tracer.trace(model, example)))
    return fns


def cuda_buckets(
    model: torch.nn.Module, precision: str, buckets, shape: tuple[int, int, int] = LEGACY.shape
) -> dict[int, BucketFn]:
    from ddm.workers.torch_expert.cuda_graphs import CudaGraphBucket, set_cuda_precision

    set_cuda_precision(precision)
    model = model.to("cuda")
    return {b: CudaGraphBucket(model, b, precision, shape) for b in sorted(buckets)}


def load(
    path: str | Path,
    meta: dict,
    device: str = "auto",
    buckets=DEFAULT_BUCKETS,
    precision: str = DEFAULT_PRECISION,
    cache: TraceCache | None = None,
) -> TorchExpert:
    """cache: where traced buckets are kept (neuron, cpu-traced); default $DDM_TRACE_CACHE_DIR. In bf16 on
    the CPU or CUDA the module itself is cast to bf16 (half the memory of float32 weights under autocast);
    DeviceError before anything is loaded when the weights cannot fit (ddm.workers.memory)."""
    device = resolve_device(device)
    check_device_precision(device, precision)
    weights = weights_path(path, meta)  # beside meta.json, or the file its "weights" names
    bf16_weights = precision == "bf16" and device in ("cpu", "cuda")
    check_load(
        f"expert {meta.get('expert', 0)} ({weights})", weights, 2 if bf16_weights else 4, device, precision
    )
    model = architecture_of(meta).build("torch", config_of(meta))
    if bf16_weights:  # cast before the weights are copied in: the load never holds a float32 model
        model = model.to(torch.bfloat16)
    model.load_state_dict(load_weights_file(weights))
    model = model.eval().requires_grad_(False)
    served = ExpertMeta.from_json(meta, device, str(path), precision)
    expert = _serving(model, served, buckets, cache, weights)
    expert.weights_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    return expert


def _serving(model, expert_meta: ExpertMeta, buckets, cache: TraceCache | None, weights: Path) -> TorchExpert:
    """The loaded model as its device runs it: eager (cpu), CUDA graphs, or traced buckets."""
    device, precision, card = expert_meta.device, expert_meta.precision, expert_meta.card
    shape = (card.sample_space if card is not None else LEGACY).shape  # traces' and graphs' static shapes
    if device in ("neuron", "cpu-traced"):
        cache = cache if cache is not None else TraceCache.from_settings()
        digest = file_sha256(weights)
        before = (cache.compiled, cache.loaded, cache.compile_s)  # a cache may serve several loads
        expert = TorchExpert(
            expert_meta, None, traced_buckets(model, device, precision, buckets, digest, cache, shape)
        )
        expert.compile_report = {
            "compiled": cache.compiled - before[0],
            "loaded": cache.loaded - before[1],
            "compile_s": cache.compile_s - before[2],
        }
        return expert
    if device == "cuda":
        return TorchExpert(expert_meta, None, cuda_buckets(model, precision, buckets, shape))
    return TorchExpert(expert_meta, model)
