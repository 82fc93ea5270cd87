"""The Paris expert's and router's configs, the name and shape of every tensor they hold, and the
configs read back from a checkpoint's shapes.

Names and shapes are written out here once, from the config alone (pure Python, no torch), so that a
checkpoint can be checked from its header before anything is loaded; tests/workers/test_paris.py checks
that the PyTorch modules' state dicts are exactly these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ddm.schema.errors import ConfigError, expected

FREQUENCY_DIM = 256  # the sinusoidal timestep features, before the time MLP
# Paris's networks read t on 0..1000 (1000: pure noise). Served here, they are given their card's time
# input in [0, 1] (t0-data: 1 = noise) and scale it themselves (the models' `time_scale`).
TIME_SCALE = 1000.0
MLP_RATIO = 4


class _PatchedConfig:
    """What the expert's and the router's configs share: positive ints, a patch grid, meta.json's form."""

    width: int
    heads: int
    patch: int
    image_size: int

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(expected(f"{type(self).__name__}.{name} a positive int", value))
        if self.width % self.heads or self.image_size % self.patch:
            raise ConfigError(expected("width divisible by heads and image_size by patch", self))

    @property
    def patches(self) -> int:
        return (self.image_size // self.patch) ** 2

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object):
        """meta.json's `config`, every field given (ConfigError naming them otherwise)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or set(data) != fields:  # a missing field is not Paris's default
            raise ConfigError(expected(f"a {cls.__name__} with the fields {sorted(fields)}", data))
        return cls(**data)


@dataclass(frozen=True)
class ParisExpertConfig(_PatchedConfig):
    """A Paris expert: a DiT with adaLN-single (one t_block shared, a scale_shift_table per block),
    self-attention, cross-attention on the projected text tokens, and a GELU-tanh MLP. Paris's own
    experts: width 1152, depth 28, 16 heads, patch 2, 4 latent channels at 32x32, CLIP's 77 x 768."""

    width: int = 1152
    depth: int = 28
    heads: int = 16
    patch: int = 2
    channels: int = 4
    image_size: int = 32
    text_width: int = 768
    # CLIP's 77 positions, padding included (Paris reads them all): no tensor holds it, the text encoder
    # does; it is the token count the expert is compiled for (JAX buckets) and checked against (the card)
    text_tokens: int = 77


@dataclass(frozen=True)
class ParisRouterConfig(_PatchedConfig):
    """Paris's router: a DiT-B with adaLN-zero blocks and a CLS token, reading x_t and t only, and a head
    Linear, GELU, LayerNorm, GELU, Linear to one logit per expert. Paris's own: width 768, depth 12, 12
    heads, patch 2, 8 experts."""

    width: int = 768
    depth: int = 12
    heads: int = 12
    patch: int = 2
    channels: int = 4
    image_size: int = 32
    num_experts: int = 8


def _time_mlp(d: int) -> dict[str, tuple[int, ...]]:
    return {
        "time_embed.mlp.0.weight": (d, FREQUENCY_DIM),
        "time_embed.mlp.0.bias": (d,),
        "time_embed.mlp.2.weight": (d, d),
        "time_embed.mlp.2.bias": (d,),
    }


def _attention(prefix: str, d: int) -> dict[str, tuple[int, ...]]:
    """torch's nn.MultiheadAttention with kdim = vdim = d: q, k and v in one fused projection."""
    return {
        f"{prefix}.in_proj_weight": (3 * d, d),
        f"{prefix}.in_proj_bias": (3 * d,),
        f"{prefix}.out_proj.weight": (d, d),
        f"{prefix}.out_proj.bias": (d,),
    }


def _mlp(prefix: str, d: int) -> dict[str, tuple[int, ...]]:
    h = MLP_RATIO * d
    return {
        f"{prefix}.0.weight": (h, d),
        f"{prefix}.0.bias": (h,),
        f"{prefix}.2.weight": (d, h),
        f"{prefix}.2.bias": (d,),
    }


def _patch_in(c: int, d: int, p: int, n: int) -> dict[str, tuple[int, ...]]:
    return {"patch_embed.weight": (d, c, p, p), "patch_embed.bias": (d,), "pos_embed": (1, n, d)}


def expert_shapes(config: ParisExpertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of a Paris expert, by its name in Paris's diffusion_pytorch_model.safetensors."""
    d, p, c = config.width, config.patch, config.channels
    shapes = {**_patch_in(c, d, p, config.patches), **_time_mlp(d)}
    shapes |= {"text_proj.weight": (d, config.text_width), "text_proj.bias": (d,)}
    shapes |= {"t_block.1.weight": (6 * d, d), "t_block.1.bias": (6 * d,)}
    for i in range(config.depth):
        shapes[f"layers.{i}.scale_shift_table"] = (6, d)
        shapes |= _attention(f"layers.{i}.attn", d) | _attention(f"layers.{i}.cross_attn", d)
        shapes |= _mlp(f"layers.{i}.mlp", d)
    shapes |= {
        "final_layer.linear.weight": (p * p * c, d),
        "final_layer.linear.bias": (p * p * c,),
        "final_layer.scale_shift_table": (2, d),
    }
    return shapes


def router_shapes(config: ParisRouterConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of Paris's router, by its name in router/pytorch_model.safetensors."""
    d = config.width
    shapes = {**_patch_in(config.channels, d, config.patch, config.patches), **_time_mlp(d)}
    shapes["cls_token"] = (1, 1, d)
    for i in range(config.depth):
        shapes |= {
            f"layers.{i}.adaLN_modulation.1.weight": (6 * d, d),
            f"layers.{i}.adaLN_modulation.1.bias": (6 * d,),
        }
        shapes |= _attention(f"layers.{i}.attn", d) | _mlp(f"layers.{i}.mlp", d)
    shapes |= {
        "head.0.weight": (d, d),
        "head.0.bias": (d,),
        "head.2.weight": (d,),
        "head.2.bias": (d,),
        "head.4.weight": (config.num_experts, d),
        "head.4.bias": (config.num_experts,),
    }
    return shapes


def parameter_count(shapes: dict[str, tuple[int, ...]]) -> int:
    total = 0
    for shape in shapes.values():
        n = 1
        for k in shape:
            n *= k
        total += n
    return total


def _depth(shapes: dict[str, tuple[int, ...]], marker: str) -> int:
    """How many blocks: the layers.<i> that hold `marker`, numbered 0..depth-1 without a gap."""
    found = {
        int(name.split(".")[1]) for name in shapes if name.startswith("layers.") and name.endswith(marker)
    }
    if not found or found != set(range(len(found))):
        raise ConfigError(expected(f"blocks layers.0..layers.N-1 with {marker}", sorted(found)))
    return len(found)


def _patch_geometry(shapes: dict[str, tuple[int, ...]], what: str) -> tuple[int, int, int, int]:
    """(width, channels, patch, image size) from patch_embed.weight [d, c, p, p] and pos_embed [1, n, d]."""
    try:
        d, c, p, _ = shapes["patch_embed.weight"]
        n = shapes["pos_embed"][1]
    except (KeyError, ValueError):
        raise ConfigError(f"{what}: no patch_embed.weight [d, c, p, p] and pos_embed [1, n, d]") from None
    side = round(n**0.5)
    if side * side != n:
        raise ConfigError(expected(f"{what}: a square grid of patches", n))
    return d, c, p, side * p


def expert_config_from(
    shapes: dict[str, tuple[int, ...]], heads: int = 16, text_tokens: int = 77
) -> ParisExpertConfig:
    """The config whose tensors these are: depth and widths from the weights; the heads and the text's
    token count, which no shape holds, as given (Paris's 16 and CLIP's 77 by default; the importer reads
    the heads from the checkpoint's config.json where it names them). ConfigError if the shapes cannot
    be read."""
    d, c, p, size = _patch_geometry(shapes, "a Paris expert")
    text = shapes.get("text_proj.weight", (d, 0))[1]
    return ParisExpertConfig(d, _depth(shapes, "scale_shift_table"), heads, p, c, size, text, text_tokens)


def router_config_from(shapes: dict[str, tuple[int, ...]], heads: int = 12) -> ParisRouterConfig:
    """As expert_config_from, for the router (heads as given: Paris's 12 by default)."""
    d, c, p, size = _patch_geometry(shapes, "Paris's router")
    experts = shapes.get("head.4.weight", (0, d))[0]
    return ParisRouterConfig(d, _depth(shapes, "adaLN_modulation.1.weight"), heads, p, c, size, experts)
