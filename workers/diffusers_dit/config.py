"""The config of a diffusers `DiTTransformer2DModel` served as an expert: its config.json's fields under
this repository's names where the registry asks for them, saved in the expert's meta.json `config`.

    in_channels   = config.json in_channels (the latent's channels)
    image_size    = config.json sample_size (the latent's side)
    num_classes   = config.json num_embeds_ada_norm (labels 0 .. N - 1; label N is the null class of
                    classifier-free guidance: the embedding table has N + 1 rows)
    out_channels  = config.json out_channels: 2 x in_channels when the model learned its variance
                    ("learned sigma", facebook/DiT-XL-2-256): the first in_channels are eps, the rest
                    the variance interpolation, which a velocity has no use for
    the rest      as config.json names them (patch_size, num_layers, heads, head width, norms)

Imports neither torch nor diffusers: the model is ddm.workers.diffusers_dit.torch_model.
Presets name the published DiT sizes at 256 x 256 (latents 4 x 32 x 32), and the test fixture's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ddm.schema.errors import ConfigError, expected
from ddm.workers.config import config_from_dict, config_to_dict

CLASS_NAME = "DiTTransformer2DModel"
# Configs written before diffusers split DiT out of Transformer2DModel (facebook/DiT-XL-2-256's is one):
# diffusers loads them as DiTTransformer2DModel when norm_type is ada_norm_zero (model_loading_utils.py
# _CLASS_REMAPPING_DICT), with the same tensor names. Their keys DiT has no use for are accepted at the
# value that leaves a DiT as it is (any value for use_linear_projection: only unpatched inputs read it).
LEGACY_CLASS = "Transformer2DModel"
LEGACY_NEUTRAL = {
    "cross_attention_dim": None,
    "num_vector_embeds": None,
    "only_cross_attention": False,
    "double_self_attention": False,
    "attention_type": "default",
    "caption_channels": None,
    "interpolation_scale": None,
    "use_additional_conditions": None,
}
# config.json key -> our field, where the names differ
RENAMED = {"sample_size": "image_size", "num_embeds_ada_norm": "num_classes"}
# config.json keys that say nothing about the weights (diffusers' own bookkeeping)
BOOKKEEPING = ("_class_name", "_diffusers_version", "_name_or_path")


@dataclass(frozen=True)
class DiffusersDiTConfig:
    """A DiTTransformer2DModel's shape (see the module docstring); defaults are DiT-XL/2 at 256."""

    in_channels: int = 4
    image_size: int = 32
    num_classes: int = 1000
    out_channels: int = 8
    patch_size: int = 2
    num_layers: int = 28
    num_attention_heads: int = 16
    attention_head_dim: int = 72
    dropout: float = 0.0
    norm_num_groups: int = 32
    attention_bias: bool = True
    activation_fn: str = "gelu-approximate"
    upcast_attention: bool = False
    norm_type: str = "ada_norm_zero"
    norm_elementwise_affine: bool = False
    norm_eps: float = 1e-5

    def __post_init__(self):
        if self.out_channels not in (self.in_channels, 2 * self.in_channels):
            want = f"out_channels {self.in_channels} (eps) or {2 * self.in_channels} (eps and learned sigma)"
            raise ConfigError(expected(want, self.out_channels))
        if self.image_size % self.patch_size:
            raise ConfigError(
                expected(f"sample_size a multiple of patch_size {self.patch_size}", self.image_size)
            )
        if self.norm_type != "ada_norm_zero":
            raise ConfigError(expected("norm_type ada_norm_zero (a class-conditional DiT)", self.norm_type))
        if self.num_classes < 1:
            raise ConfigError(expected("num_embeds_ada_norm >= 1 (the class count)", self.num_classes))

    @property
    def learned_sigma(self) -> bool:
        return self.out_channels == 2 * self.in_channels

    def to_dict(self) -> dict:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DiffusersDiTConfig:
        return config_from_dict(cls, data)

    def diffusers_kwargs(self) -> dict:
        """The DiTTransformer2DModel constructor's arguments (config.json's names)."""
        ours = {v: k for k, v in RENAMED.items()}
        return {ours.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_diffusers(cls, config_json: dict) -> DiffusersDiTConfig:
        """From a DiTTransformer2DModel folder's config.json; ConfigError for another class or a key
        this config does not know (it would change the model)."""
        name = config_json.get("_class_name", CLASS_NAME)
        legacy = name == LEGACY_CLASS and config_json.get("norm_type") == "ada_norm_zero"
        if name != CLASS_NAME and not legacy:
            want = f"a {CLASS_NAME} config.json (or a {LEGACY_CLASS} one with norm_type ada_norm_zero)"
            raise ConfigError(expected(want, name))
        data = {RENAMED.get(k, k): v for k, v in config_json.items() if k not in BOOKKEEPING}
        if legacy:
            for key, neutral in LEGACY_NEUTRAL.items():
                if data.pop(key, neutral) != neutral:
                    raise ConfigError(expected(f"{LEGACY_CLASS} {key} {neutral!r} (a DiT)", config_json[key]))
            data.pop("use_linear_projection", None)
        if data.get("out_channels") is None:  # diffusers: None means in_channels
            data["out_channels"] = data.get("in_channels", cls.in_channels)
        return config_from_dict(cls, data)


def _dit(hidden: int, layers: int, heads: int) -> DiffusersDiTConfig:
    return DiffusersDiTConfig(
        num_layers=layers, num_attention_heads=heads, attention_head_dim=hidden // heads
    )


PRESETS: dict[str, DiffusersDiTConfig] = {
    "xl-2": _dit(1152, 28, 16),  # facebook/DiT-XL-2-256: 675M parameters
    "small": _dit(384, 12, 6),  # DiT-S/2's shape
    # the test fixture's (ops/random_diffusers.py): 8 x 8 latents, 2 layers, 2 heads x 8
    "tiny": DiffusersDiTConfig(
        image_size=8, num_classes=10, num_layers=2, num_attention_heads=2, attention_head_dim=8
    ),
}
