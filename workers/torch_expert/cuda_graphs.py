"""CUDA small-batch latency: one CUDA graph per batch bucket, fed through pinned host buffers.

A forward pass of this UNet is 150-200 small kernels; at the batch sizes per-step requests bring, the
launches cost more than the math. A captured graph replays them all in one launch. Inputs land in
page-locked buffers and cross with non-blocking copies on the graph's stream; shapes are fixed per
bucket, so cudnn.benchmark picks each convolution's algorithm once, before capture.

NOT RUN HERE: the development machines have no GPU. The torch calls follow PyTorch's CUDA graph
documentation (warm-up on a side stream, then torch.cuda.graph capture, replay on static tensors).
"""

from __future__ import annotations

import numpy as np
import torch

from ddm.workers.config import condition_shape
from ddm.workers.torch_expert.tracing import condition_zeros

WARMUP_PASSES = 3  # before capture: cudnn.benchmark's search and lazy init must not land in the graph


def set_cuda_precision(precision: str) -> None:
    """fp32 turns TF32 off (PyTorch's default for convolutions is on); tf32 turns it on for both."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True  # fixed shapes per bucket: the search pays off once


class CudaGraphBucket:
    """One bucket: static device tensors, pinned host staging buffers, a captured graph. Not
    thread-safe (the buffers are shared): the expert worker computes on one thread."""

    def __init__(
        self, model: torch.nn.Module, bucket: int, precision: str, shape: tuple[int, int, int] = (1, 32, 32)
    ):
        """shape: one sample's (C, H, W), the expert's sample space (its card)."""
        dev = torch.device("cuda")
        self.bucket = bucket
        self.x = torch.zeros(bucket, *shape, device=dev)
        self.t = torch.zeros(bucket, device=dev)
        condition = condition_shape(model.cfg)  # a text expert's y: embeddings [bucket, *condition]
        self.y = condition_zeros(bucket, condition, dev)
        self.host_x = torch.zeros(bucket, *shape).pin_memory()
        self.host_t = torch.zeros(bucket).pin_memory()
        self.host_y = condition_zeros(bucket, condition).pin_memory()
        self.host_out = torch.zeros(bucket, *shape).pin_memory()
        self.stream = torch.cuda.Stream()
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")

        def forward():
            with autocast:
                return model(self.x, self.t, self.y).float()

        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream), torch.inference_mode():
            for _ in range(WARMUP_PASSES):
                forward()
        self.stream.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self.graph, stream=self.stream):
            self.out = forward()

    def __call__(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x f32 [bucket,C,H,W], t f32 [bucket], y i64 [bucket] (or f32 [bucket, text_width]) -> v f32
        [bucket,C,H,W]."""
        self.host_x.numpy()[...] = x
        self.host_t.numpy()[...] = t
        self.host_y.numpy()[...] = y
        with torch.cuda.stream(self.stream):
            self.x.copy_(self.host_x, non_blocking=True)
            self.t.copy_(self.host_t, non_blocking=True)
            self.y.copy_(self.host_y, non_blocking=True)
            self.graph.replay()
            self.host_out.copy_(self.out, non_blocking=True)
        self.stream.synchronize()
        return self.host_out.numpy().copy()
