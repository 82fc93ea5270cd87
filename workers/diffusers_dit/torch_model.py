"""A diffusers DiTTransformer2DModel as this repository's torch expert model: forward(x, t, y) -> the
network's eps prediction, the learned-sigma half dropped. Read from the installed diffusers source
(models/transformers/dit_transformer_2d.py, pipelines/dit/pipeline_dit.py): forward(hidden_states,
timestep, class_labels) returns `.sample` of out_channels channels, and the DiT pipeline keeps the
first in_channels of them as eps when out_channels = 2 x in_channels; the null class of guidance is
label num_embeds_ada_norm (the pipeline's 1000).

The time input arrives on the network's own scale (the card's discrete-linear schedule: the step index
0 .. 999, ddm.workers.objectives), as a float: diffusers' sinusoidal embedding takes a float timestep.
Its state_dict is the diffusers file's (the subclass adds no parameter), so the folder's
diffusion_pytorch_model.safetensors loads as it is. diffusers is imported on the first model built
(the `import` extra), so a worker without it is told which extra to install.
"""

from __future__ import annotations

import functools

from ddm.schema.errors import ConfigError
from ddm.workers.diffusers_dit.config import DiffusersDiTConfig

INSTALL = "pip install 'ddm-pipeline[import]'"


def require_diffusers():
    """The diffusers module; ConfigError naming the extra when it is not installed."""
    try:
        import diffusers
    except ImportError:
        raise ConfigError(f"diffusers checkpoints need the diffusers package: {INSTALL}") from None
    return diffusers


@functools.cache
def served_class() -> type:
    """ServedDiT: DiTTransformer2DModel whose forward is the expert's (x [B,C,H,W], t [B] float,
    y [B] int64) -> eps [B,C,H,W]. Defined on first use (diffusers is imported then)."""
    base = require_diffusers().DiTTransformer2DModel

    class ServedDiT(base):
        def forward(self, x, t, y):  # type: ignore[override]
            out = super().forward(x, timestep=t, class_labels=y).sample  # [B, out_channels, H, W]
            return out[:, : x.shape[1]]  # eps; the rest is the learned variance (a velocity needs none)

    return ServedDiT


def served_expert(config: DiffusersDiTConfig):
    """The registry's "model" entry: an untrained ServedDiT of `config` (load_expert loads the weights)."""
    model = served_class()(**config.diffusers_kwargs())
    model.cfg = config  # what the trace cache's model identity reads (ddm.workers.torch_expert.expert)
    return model
