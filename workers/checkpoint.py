"""Expert checkpoint folders, whatever their framework: the expert meta's one builder and its checked
reader, and the rules of resuming.

    meta.json                 framework, architecture (absent: unet), preset, config, partition,
                              expert, classes, steps, ... (JSON,
                              the record of ddm.schema.checkpoint_meta, built by `expert_meta`)
    <weights file>            EMA weights: model.safetensors (torch, the canonical layout of
                              ddm.workers.layout), model.msgpack (jax, the Flax params tree); or
                              the file meta.json's "weights" names (`weights_path`)
    <train state file>        the resumable state (raw weights, optimizer, step)
    loss.csv                  step, loss, lr, wall seconds

Each framework's file names are in its record (ddm.workers.frameworks); each architecture's config
class and presets in its own (ddm.workers.architectures).
Nothing here is ever unpickled: safetensors and msgpack only.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ddm.schema import checkpoint_meta, expert_card
from ddm.schema.conditioning import Conditioning
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.expert_card import FLOW, ExpertCard, Objective, card_of, new_card
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.architectures import DEFAULT_ARCHITECTURE, ExpertArchitecture, expert_architecture
from ddm.workers.config import condition_shape
from ddm.workers.frameworks import ExpertFramework, expert_framework

# meta.json's optional field naming the weights file elsewhere (weights_path)
WEIGHTS_FIELD = "weights"
# What must match between a run and the run it resumes.
RESUME_KEYS = ("framework", "architecture", "preset", "expert", "partition")


def architecture_name(meta: dict) -> object:
    """meta.json's `architecture`; a meta without one is a UNet's (written before the field existed)."""
    return expert_card.architecture_of(meta)


def architecture_of(meta: dict, source: str = checkpoint_meta.META_FILE) -> ExpertArchitecture:
    """The architecture of an expert's meta record; ConfigError naming the known ones otherwise."""
    return expert_architecture(architecture_name(meta), f"{source} architecture")


def check_expert_meta(meta: dict, source: str = checkpoint_meta.META_FILE) -> ExpertFramework:
    """The framework of an expert's meta record; its architecture known and written in that framework,
    its `config` checked by the architecture's config class. The schema checks the record's shape only
    (ddm.schema.checkpoint_meta); this is its expert half."""
    framework = expert_framework(meta.get("framework"), f"{source} framework")
    architecture = architecture_of(meta, source)
    try:
        architecture.code(framework.name)
        architecture.config_from(meta.get("config"))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return framework


def weights_path(folder: str | Path, meta: dict) -> Path:
    """The weights file of an expert: the one meta.json's "weights" names when it names one (a path
    relative to the folder, or absolute: weights served in place, as an imported diffusers or Paris
    folder's, never copied), else the framework's file beside meta.json (every checkpoint this system
    writes). ConfigError when "weights" is not a non-empty string."""
    named = meta.get(WEIGHTS_FIELD)
    if named is None:
        return Path(folder) / expert_framework(meta["framework"]).weights_file
    if not (isinstance(named, str) and named.strip()):
        want = f'meta.json "{WEIGHTS_FIELD}" a file path (relative to the folder, or absolute)'
        raise ConfigError(expected(want, named))
    return Path(folder) / named  # an absolute path stays itself


def read_meta(path: str | Path) -> dict:
    """An expert checkpoint's meta.json, checked: an expert's record, framework known, config valid,
    weights file present (`weights_path`). Weights named elsewhere ("weights") must have their sha256 on
    the card: a file outside the folder can change under it, so it is checked at every load."""
    folder = Path(path)
    source = str(folder / checkpoint_meta.META_FILE)
    meta = checkpoint_meta.read_meta(folder, kind="expert")
    check_expert_meta(meta, source)
    weights = weights_path(folder, meta)
    if not weights.is_file():
        raise ConfigError(expected(f"{weights.name} in {weights.parent}", "missing"))
    card = check_card(meta, source)
    if WEIGHTS_FIELD in meta and card.weights_sha256 is None:
        want = f'a card with weights_sha256 (meta.json names its weights: "{meta[WEIGHTS_FIELD]}")'
        raise ConfigError(f"{source}: {expected(want, 'null')}")
    return meta


def check_card(meta: dict, source: str = checkpoint_meta.META_FILE) -> ExpertCard:
    """The expert's card (the derived LEGACY one when its meta has none), checked: a valid record that
    agrees with the meta's framework and architecture, and with its model config where the config
    names the sample's channels, size or classes. ConfigError naming what differs."""
    card = card_of(meta, source)
    config = config_of(meta)
    space = card.sample_space
    for field, want in (
        ("in_channels", space.shape[0]),
        ("image_size", space.shape[1] if space.shape[1] == space.shape[2] else space.shape[1:]),
        ("num_classes", space.num_classes),
    ):
        have = getattr(config, field, want)
        if have != want:
            raise ConfigError(
                f"{source}: {expected(f'config {field} {want} (the card: {space.describe()})', have)}"
            )
    width = getattr(config, "text_width", 0)
    if width != card.text_width:
        said = card.conditioning.describe() if card.conditioning is not None else "class labels"
        raise ConfigError(
            f"{source}: {expected(f'config text_width {card.text_width} (the card: {said})', width)}"
        )
    if card.text_width and condition_shape(config) != card.text_shape:
        text = card.conditioning.text
        want = f"a model that reads {text.form} embeddings {list(card.text_shape)} (the card)"
        raise ConfigError(f"{source}: {expected(want, f'one that reads {list(condition_shape(config))}')}")
    return card


def check_weights_digest(folder: str | Path, meta: dict) -> None:
    """Refuse weights that are not the ones the card describes (when the card records a digest)."""
    digest = card_of(meta).weights_sha256
    if digest is None:
        return
    path = weights_path(folder, meta)
    if checkpoint_meta.file_sha256(path) != digest:
        raise ConfigError(expected(f"{path} with the card's sha256 {digest[:12]}...", "other bytes"))


def config_of(meta: dict):
    """The meta's config as its architecture's config object (a UNetConfig for a UNet); its framework
    must be known too."""
    expert_framework(meta["framework"], "meta.json framework")
    return architecture_of(meta).config_from(meta["config"])


def expert_meta(
    framework: str,
    preset: str,
    expert: int,
    partition: dict,
    label_counts,
    device: str | None = None,
    architecture: str = DEFAULT_ARCHITECTURE,
    *,
    objective: Objective = FLOW,
    sample_space: SampleSpace = LEGACY,
    conditioning: Conditioning | None = None,
    config=None,
    **more,
) -> dict:
    """THE builder of an expert's meta record (training, distillation, random experts, test fakes),
    before training adds its numbers (steps, loss, wall time); write it with schema's write_meta.

    partition: the manifest's identity (PartitionManifest.identity()), or what stands for one;
    label_counts: int [classes], the samples per class the expert learns from (classes follow);
    device: where it trains (omitted when None); architecture: which model (ddm.workers.architectures);
    objective, sample_space: the card's (schema/expert_card.py; default flow-velocity, t0-noise, LEGACY);
    conditioning: the card's, for a text expert (kind text, form pooled: the config's text_width is its
    width, the sample space has no classes); None: class labels as before;
    config: the architecture's config as it is (an imported checkpoint's, read from its weights) instead
    of `preset` sized for the sample space; the card check at load compares the two;
    more: further fields (steps, distilled_from).
    """
    expert_framework(framework)
    record = expert_architecture(architecture)
    record.code(framework)  # written in that framework
    counts = [int(n) for n in label_counts]
    text = conditioning.text if conditioning is not None else None
    if config is None:
        config = record.preset(preset, sample_space)
        if text is not None:  # the presets train pooled text experts (cross-attention: Paris's, imported)
            if text.form != "pooled":
                raise ConfigError(expected("a text expert of form pooled (tokens: not yet)", text.form))
            config = replace(config, text_width=text.width)
    meta = {
        "kind": "expert",
        "framework": framework,
        "architecture": architecture,
        "preset": preset,
        "config": config.to_dict(),
        "expert": int(expert),
        "partition": partition,
        "classes": [c for c, n in enumerate(counts) if n > 0],
        "label_counts": counts,
        "created": checkpoint_meta.utc_now(),
    }
    if device is not None:
        meta["device"] = device
    if clash := sorted((meta.keys() | {"card"}) & more.keys()):
        raise TypeError(f"expert_meta: {clash} are built here, not passed in")
    meta = {**meta, **more}
    # the card: what it predicts and in which sample space; the weights digest comes with the weights
    try:
        card = new_card(meta, objective, sample_space, conditioning=conditioning)
    except SchemaError as exc:  # e.g. text conditioning in a sample space with classes
        raise ConfigError(str(exc)) from None
    return {**meta, "card": card.to_dict()}


def check_resume(out: Path, meta: dict, resume: bool) -> None:
    """Refuse to mix runs: resuming must be asked for and must match framework, preset and data."""
    framework = meta["framework"]
    if not (out / expert_framework(framework).train_state_file).exists():
        if resume and out.exists() and any(out.iterdir()):
            raise ConfigError(expected(f"a {framework} train state in {out} to resume", "none"))
        return
    if not resume:
        raise ConfigError(
            f"{out} already holds a training run; pass --resume to continue it or pick another --out"
        )
    old = checkpoint_meta.read_meta(out, kind="expert")
    old = {**old, "architecture": architecture_name(old)}
    meta = {**meta, "architecture": architecture_name(meta)}
    for key in RESUME_KEYS:
        if old.get(key) != meta[key]:
            raise ConfigError(
                expected(f"--resume with the same {key} as {out}", f"{meta[key]} vs {old.get(key)}")
            )
    before, now = card_of(old).objective, card_of(meta).objective
    if before != now:
        raise ConfigError(
            expected(f"--resume with the same objective as {out}", f"{now.describe()} vs {before.describe()}")
        )
    before, now = card_of(old).conditioning, card_of(meta).conditioning
    if before != now:
        said = [c.describe() if c is not None else "class labels" for c in (now, before)]
        raise ConfigError(expected(f"--resume with the same conditioning as {out}", " vs ".join(said)))
