"""Paris's router (a DiT-B reading x_t and t, workers/paris/torch_model.py) behind the Router protocol of
router/policies.py, run in the router worker in PyTorch: probs(x, t, y) -> softmax of its logits.

Its checkpoint folder is what `ddm import paris` writes: a meta.json of kind "router" with architecture
"paris", its config and the path of Paris's own router/pytorch_model.safetensors ("weights", served in
place) with that file's sha256, checked at every load (the file lives outside the folder). The tensors'
names and shapes are checked from the file's header before anything is loaded.

Time: this system's t (0 noise, 1 data) is Paris's s = 1 - t, which served_router scales to 0..1000.
It reads no prompt (Paris's design): y is ignored, so `reads_prompts` is false and a text job's rows
give it their null labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.schema.checkpoint_meta import file_sha256, read_meta
from ddm.schema.errors import ConfigError, expected
from ddm.schema.sample_space import SampleSpace
from ddm.workers.checkpoint import weights_path
from ddm.workers.paris.config import ParisRouterConfig, router_shapes
from ddm.workers.paris.weights import check_tensors, tensor_shapes

ARCHITECTURE = "paris"  # meta.json's "architecture" of a Paris router folder
CHUNK = 64  # rows per forward pass (a job's n <= 64: one pass per step at most)


def is_paris_router(folder: str | Path) -> bool:
    """True when the router folder's meta.json names Paris's architecture."""
    return read_meta(folder, kind="router").get("architecture") == ARCHITECTURE


@dataclass(frozen=True)
class ParisRouterSpace:
    """What the deployment loader asks of a router's config: the sample space it reads, no prompt."""

    config: ParisRouterConfig
    text_width: int = 0

    def check_space(self, space: SampleSpace) -> str:
        """'' when this router reads `space`, else what differs (for a refusal at load)."""
        c = self.config
        ours = (c.channels, c.image_size, c.image_size)
        if ours != space.shape:
            return f"input {'x'.join(map(str, ours))} vs {'x'.join(map(str, space.shape))}"
        return ""


class ParisRouterPolicy:
    """Paris's router in PyTorch, on the router worker's GPU where torch sees one, else its CPU. It runs
    in the worker's one thread, between steps: on 2 CPU cores a call costs about 0.25 s on one row and
    grows with the rows (docs/BENCHMARKS.md, "Paris at full size"), so a router serving many Paris jobs
    wants a GPU."""

    def __init__(self, folder: str | Path):
        import torch
        from safetensors.torch import load_file

        from ddm.workers.paris.torch_model import served_router

        folder = Path(folder)
        self.meta = read_meta(folder, kind="router")
        self.config = ParisRouterConfig.from_dict(self.meta["config"])
        self.cfg = ParisRouterSpace(self.config)
        weights = weights_path(folder, self.meta)  # the file meta.json's "weights" names, as an expert's
        if not weights.is_file():
            raise ConfigError(expected(f"Paris's router file, named by {folder}/meta.json", weights))
        digest = file_sha256(weights)
        if digest != self.meta.get("weights_sha256"):
            raise ConfigError(expected(f"{weights} with the sha256 meta.json records", digest))
        check_tensors(tensor_shapes(weights), router_shapes(self.config), f"Paris's router {weights}")
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = served_router(self.config)
        self.model.load_state_dict(load_file(str(weights)))
        self.model.eval().requires_grad_(False).to(self.device)
        self._torch = torch

    @property
    def num_experts(self) -> int:
        return self.config.num_experts

    def probs(self, x: np.ndarray, t: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        """x f32 [B, C, H, W], t f32 [B] (0 noise, 1 data) -> p(expert) f32 [B, K]; y is not read."""
        torch = self._torch
        out = []
        with torch.no_grad():
            for i in range(0, len(x), CHUNK):
                xs = torch.from_numpy(np.ascontiguousarray(x[i : i + CHUNK], np.float32)).to(self.device)
                s = 1.0 - torch.from_numpy(np.asarray(t[i : i + CHUNK], np.float32)).to(self.device)
                out.append(torch.softmax(self.model(xs, s), dim=-1).float().cpu().numpy())  # s: Paris's time
        return np.concatenate(out) if out else np.zeros((0, self.num_experts), np.float32)
