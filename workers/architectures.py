"""The registry of expert architectures: the one table that knows which model an expert may be (the
twin UNets, the twin DiTs, ...), beside ddm.workers.frameworks, which knows what it is written in.

An expert is a (framework, architecture) pair. meta.json records both: `framework` and `architecture`
(absent: "unet", every checkpoint written before the field existed). Whatever asks "which model?"
asks this table: load_expert and make_trainer (through the framework's code, which builds the model
with `ExpertArchitecture.build`), convert, the random experts, the expert-meta builder and reader,
`ddm train --arch`, `ddm doctor`.

A record is plain data (name, config class, presets) plus entry points named "module:function" and
imported on their first call, so importing this module imports neither torch nor jax. Each record
lives beside its architecture's config (the UNet's in ddm.workers.config, the DiT's in
ddm.workers.dit.architecture); REGISTERED names where. Adding an architecture: its folder, and one
line in REGISTERED (docs/ARCHITECTURE.md, "Adding an expert architecture").

What a framework asks of an architecture (the entries of `models`):
    torch  "model": config -> torch.nn.Module, forward(x [B,C,H,W], t [B], y [B] int64) -> v [B,C,H,W];
           its state_dict (no buffers) IS the canonical layout.
    jax    "model": config -> flax.linen.Module, __call__(x [B,H,W,C], t [B], y [B] int32) -> [B,H,W,C];
           "init_params": (model, seed) -> params tree (also the template weights are restored into).
A config with text_width > 0 is a text expert's: both models then read y as the pooled prompt
embeddings, float32 [B, text_width], through a Linear in the class embedding's place (cross-attention on
token embeddings: not yet).
The canonical layout <-> Flax tree conversion is `to_flax` / `from_flax` (default: ddm.workers.layout,
which maps any twin whose Flax modules carry the torch attribute names).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ddm.schema.errors import ConfigError, expected
from ddm.schema.expert_card import DEFAULT_ARCHITECTURE as DEFAULT_ARCHITECTURE  # one home: the card
from ddm.schema.expert_card import architecture_of
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.frameworks import EntryPoint

# Where each architecture's record lives, as "module:NAME"; one line per architecture.
REGISTERED: tuple[str, ...] = (
    "ddm.workers.config:UNET",
    "ddm.workers.dit.architecture:DIT",
    "ddm.workers.diffusers_dit.architecture:DIFFUSERS_DIT",
    "ddm.workers.paris.architecture:PARIS",
)


@dataclass(frozen=True)
class ExpertArchitecture:
    """What the rest of the code may know about one expert architecture."""

    name: str  # meta.json's `architecture`, the CLI's --arch
    config: type  # meta.json's `config` as an object: from_dict(dict) and to_dict(); one class per record
    presets: Mapping[str, Any]  # preset name -> config
    models: Mapping[str, Mapping[str, EntryPoint]]  # framework -> {"model", ...}: see the module docstring
    title: str = ""  # how a model card names it ("conditional UNet"); empty: the name
    to_flax: EntryPoint = field(default=EntryPoint("ddm.workers.layout:canonical_to_flax"))
    from_flax: EntryPoint = field(default=EntryPoint("ddm.workers.layout:flax_to_canonical"))
    # `ddm train` / `ddm distill` build it from its presets; False: it is only ever imported (Paris's)
    trainable: bool = True

    def config_from(self, data: object) -> Any:
        """meta.json's `config` as this architecture's config object; ConfigError when malformed."""
        if not isinstance(data, dict):
            raise ConfigError(expected(f"a {self.name} expert's config as a JSON object", data))
        return self.config.from_dict(data)

    def preset(self, name: str, space: SampleSpace = LEGACY) -> Any:
        """Preset `name` sized for the sample space `space`: its channels, size and classes (the legacy
        space: the preset as written). Every architecture's config names in_channels, image_size and
        num_classes; the models are square, so a space with height != width is refused."""
        try:
            config = self.presets[name]
        except KeyError:
            raise ConfigError(expected(f"a {self.name} preset in {sorted(self.presets)}", name)) from None
        c, h, w = space.shape
        if h != w:
            raise ConfigError(expected(f"a square sample space for a {self.name}", space.describe()))
        return replace(config, in_channels=c, image_size=h, num_classes=space.num_classes)

    def code(self, framework: str, entry: str = "model") -> EntryPoint:
        """The entry point `entry` of this architecture in `framework`; ConfigError when it has none."""
        try:
            return self.models[framework][entry]
        except KeyError:
            written = f"a framework the {self.name} architecture is written in ({sorted(self.models)})"
            raise ConfigError(expected(written, framework)) from None

    def build(self, framework: str, config: Any):
        """The `framework` model of this architecture for `config` (a torch or a Flax module)."""
        return self.code(framework)(config)


def model_title(meta: dict) -> str:
    """How a model card names the model of an expert's meta (an unknown architecture: its name)."""
    name = architecture_of(meta)
    record = architectures().get(name)
    return (record.title or record.name) if record is not None else str(name)


def twin_models(torch_model: str, flax_model: str, flax_init: str) -> dict[str, dict[str, EntryPoint]]:
    """`models` of an architecture written as twins: "module:function" of each framework's model."""
    return {
        "torch": {"model": EntryPoint(torch_model)},
        "jax": {"model": EntryPoint(flax_model), "init_params": EntryPoint(flax_init)},
    }


@functools.cache
def architectures() -> dict[str, ExpertArchitecture]:
    """name -> record, REGISTERED resolved (first call imports the records' modules: no torch, no jax)."""
    records = [EntryPoint(target).resolve() for target in REGISTERED]
    table = {r.name: r for r in records}
    configs = {r.config for r in records}
    if len(table) != len(records) or len(configs) != len(records):
        raise ConfigError(expected("architectures with distinct names and config classes", REGISTERED))
    return table


def trainable_names() -> list[str]:
    """The architectures `ddm train --arch` and `ddm distill` can build from a preset, sorted."""
    return sorted(name for name, record in architectures().items() if record.trainable)


def architecture_names() -> list[str]:
    """The known architectures, sorted: the CLI's --arch choices and the wording of every refusal."""
    return sorted(architectures())


def preset_names() -> list[str]:
    """Every preset name of every architecture (the CLI's --preset choices; the architecture checks)."""
    return sorted({p for a in architectures().values() for p in a.presets})


def expert_architecture(name: object, what: str = "architecture") -> ExpertArchitecture:
    """The record of architecture `name`; ConfigError naming the known ones otherwise.
    what: where the name came from, for the message ("meta.json architecture", "--arch")."""
    record = architectures().get(name) if isinstance(name, str) else None
    if record is None:
        raise ConfigError(expected(f"{what} one of {', '.join(architecture_names())}", name))
    return record


def architecture_of_config(config: object) -> ExpertArchitecture:
    """The architecture whose config class `config` is (a trainer or a writer given only the config)."""
    for record in architectures().values():
        if type(config) is record.config:
            return record
    raise ConfigError(expected("the config of a registered architecture", type(config).__name__))
