"""UNet presets as frozen dataclasses; the config is saved with every checkpoint. UNET is the
architecture's record in the registry (ddm.workers.architectures)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES
from ddm.workers.architectures import ExpertArchitecture, twin_models


@dataclass(frozen=True)
class UNetConfig:
    """Shape of the conditional UNet shared by the PyTorch and Flax experts."""

    base_channels: int = 64  # c: encoder levels use c, 2c, 4c
    emb_dim: int = 128  # sinusoidal time embedding and class embedding width
    num_classes: int = NUM_CLASSES  # plus one null class for classifier-free guidance
    groups: int = 8  # GroupNorm groups
    image_size: int = 32
    in_channels: int = 1
    # 0: class-conditioned (the class_emb table). > 0: text-conditioned, a Linear (text_emb) of the pooled
    # prompt embedding [B, text_width] takes the table's place (no class_emb, num_classes unread)
    text_width: int = 0

    def __post_init__(self):
        check_text_width(self.text_width)

    def to_dict(self) -> dict:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> UNetConfig:
        return config_from_dict(cls, data)


def check_text_width(width: object) -> None:
    if not isinstance(width, int) or isinstance(width, bool) or width < 0:
        raise ConfigError(expected("text_width an int >= 0 (0: class-conditioned)", width))


def condition_shape(cfg) -> tuple[int, ...]:
    """One row of what an expert model reads as its conditioning: () a class label; (text_width,) a
    pooled prompt embedding; (text_tokens, text_width) every token's embedding (a config with
    text_tokens, as Paris's, whose cross-attention reads CLIP's 77 positions)."""
    width, tokens = getattr(cfg, "text_width", 0), getattr(cfg, "text_tokens", 0)
    if not width:
        return ()
    return (tokens, width) if tokens else (width,)


def config_to_dict(config) -> dict:
    """meta.json's `config` of a frozen config dataclass (any architecture's): its fields, without
    text_width when it is 0, so a class-conditioned expert's meta.json is byte for byte what it was
    before the field existed (and a config without it reads as 0)."""
    data = asdict(config)
    if not data.get("text_width"):
        data.pop("text_width", None)
    return data


def config_from_dict(cls: type, data: dict):
    """meta.json's `config` as the frozen dataclass `cls` (any architecture's); ConfigError naming the
    fields when it holds one `cls` does not have."""
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ConfigError(expected(f"{cls.__name__} fields {sorted(names)}", sorted(unknown)))
    return cls(**data)


PRESETS: dict[str, UNetConfig] = {
    "base": UNetConfig(base_channels=64),  # the seed's model
    "small": UNetConfig(base_channels=32),  # CPU training in under an hour
    "tiny": UNetConfig(base_channels=16),  # tests
}


def get_preset(name: str) -> UNetConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(expected(f"a preset in {sorted(PRESETS)}", name)) from None


UNET = ExpertArchitecture(
    "unet",
    UNetConfig,
    PRESETS,
    twin_models(
        "ddm.workers.torch_expert.unet:UNet",
        "ddm.workers.jax_expert.unet:UNet",
        "ddm.workers.jax_expert.unet:init_params",
    ),
    title="conditional UNet",
)
