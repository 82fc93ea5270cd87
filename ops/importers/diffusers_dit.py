"""A deployment that serves diffusers `DiTTransformer2DModel` folders in place, one expert each, with a
diffusers `AutoencoderKL` as its decoder stage (issue 38 part 3).

    import_dit(dit_dirs, vae_dir, out_dir, *, class_names=None, classes=None,
               value_range=(-8.0, 8.0), device="auto", guidance=4.0, dataset="imported",
               name=None, preview_samples=2) -> Path        (the deployment.toml written)

dit_dirs: folders holding a DiTTransformer2DModel's config.json and diffusion_pytorch_model.safetensors
(as `save_pretrained` writes them), or DiTPipeline roots (facebook/DiT-XL-2-256's layout: transformer/,
vae/, scheduler/, model_index.json), whose transformer/ is then served. vae_dir: an AutoencoderKL
folder, or None for the first pipeline root's vae/. What OUT holds (nothing copied; every meta.json
names its file and the file's sha256):

    OUT/deployment.toml    the experts, [decoder], [sample_space] (the DiT's latent C x H x W in
                           value_range, its classes), the router (oracle when `classes` gives every
                           label to one expert, else label-prior), guidance (DiTPipeline's default 4)
    OUT/expert_<i>/meta.json   architecture "diffusers-dit", "weights": the absolute path of the DiT's
                           safetensors; its card: ddpm-eps (a pipeline's scheduler_config.json may say
                           sample or v_prediction) under discrete-linear {beta_start, beta_end, steps}
                           (DDPM's 1e-4 .. 0.02 over 1000, or the scheduler config's), t0-data (timestep
                           0 = data, 999 = noise), converted at the expert (ddm.workers.objectives)
    OUT/decoder/meta.json  the VAE served in place (ddm.workers.autoencoder.diffusers_card)

class_names: one per label (default: a pipeline's model_index.json id2label, first name of each, else
"0", "1", ...); classes: per expert, the labels it serves (default all: every expert every class).
Names and shapes are checked from the safetensors header (nothing loaded) against the model the
config.json builds, refused with the lists of missing, unexpected and wrongly shaped tensors. The
written deployment is read back through the router's checks before this returns.

Proven on tiny fixtures written by diffusers' save_pretrained (ops/random_diffusers.py); the
real facebook/DiT-XL-2-256 weights were never loaded here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.autoencoder_card import latent_dataset_name
from ddm.schema.checkpoint_meta import file_sha256, write_meta
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, expected
from ddm.schema.expert_card import T0_DATA, Objective, Schedule, stamp_card
from ddm.schema.sample_space import SampleSpace
from ddm.workers.autoencoder.diffusers_card import DEFAULT_LATENT_RANGE, write_diffusers_decoder
from ddm.workers.autoencoder.diffusers_vae import bin_note
from ddm.workers.checkpoint import expert_meta
from ddm.workers.diffusers_dit.config import PRESETS, DiffusersDiTConfig
from ddm.workers.paris.weights import check_tensors, tensor_shapes

DIT_FILE = "diffusion_pytorch_model.safetensors"
ARCHITECTURE = "diffusers-dit"
GUIDANCE = 4.0  # diffusers' DiTPipeline guidance_scale default (DiT's sample.py cfg-scale 4.0)
# scheduler_config.json prediction_type -> the card's objective
PREDICTIONS = {"epsilon": "ddpm-eps", "sample": "ddpm-x0", "v_prediction": "ddpm-v"}
DIT_OBJECTIVE = Objective("ddpm-eps", Schedule.make("discrete-linear"), T0_DATA)  # facebook/DiT-XL-2-256


@dataclass(frozen=True)
class DiTFolder:
    """One DiT as read from disk: its transformer folder, config, objective, and a pipeline root's
    class names and VAE folder (None when it is a bare transformer folder)."""

    transformer: Path
    config: DiffusersDiTConfig
    objective: Objective
    class_names: tuple[str, ...] | None = None
    vae: Path | None = None

    @property
    def weights(self) -> Path:
        return self.transformer / DIT_FILE

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        c = self.config
        return (c.in_channels, c.image_size, c.image_size)


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(expected(f"{path} a JSON object", type(data).__name__))
    return data


def objective_of(scheduler_config: dict | None, source: str = "scheduler_config.json") -> Objective:
    """The card's objective from a diffusers scheduler config (DDPM / DDIM / ...): a linear beta schedule
    and its prediction_type; None: DiT's (DIT_OBJECTIVE). ConfigError for what the card cannot say."""
    if scheduler_config is None:
        return DIT_OBJECTIVE
    c = scheduler_config
    if c.get("beta_schedule", "linear") != "linear" or c.get("trained_betas") is not None:
        want = 'beta_schedule "linear" (discrete-linear; others are not on the card yet)'
        raise ConfigError(f"{source}: {expected(want, c.get('beta_schedule'))}")
    prediction = c.get("prediction_type", "epsilon")
    if prediction not in PREDICTIONS:
        raise ConfigError(f"{source}: {expected(f'prediction_type in {list(PREDICTIONS)}', prediction)}")
    schedule = Schedule.make(
        "discrete-linear",
        beta_start=c.get("beta_start", 1e-4),
        beta_end=c.get("beta_end", 0.02),
        steps=c.get("num_train_timesteps", 1000),
    )
    return Objective(PREDICTIONS[prediction], schedule, T0_DATA)


def model_shapes(config: DiffusersDiTConfig) -> dict[str, tuple[int, ...]]:
    """name -> shape of every tensor the served model loads, built on torch's meta device (no memory)."""
    import torch

    from ddm.workers.diffusers_dit.torch_model import served_expert

    with torch.device("meta"):
        model = served_expert(config)
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def _id2label_names(index: dict, count: int) -> tuple[str, ...] | None:
    """A pipeline's model_index.json id2label ({"0": "tench, Tinca tinca", ...}) as one name per label
    (the first synonym); None when it has none or not exactly `count`."""
    table = index.get("id2label")
    if not isinstance(table, dict) or sorted(table, key=int) != [str(i) for i in range(count)]:
        return None
    return tuple(str(table[str(i)]).split(",")[0].strip() or str(i) for i in range(count))


def read_dit(folder: str | Path) -> DiTFolder:
    """A DiT transformer folder or DiTPipeline root, its tensors checked from the header."""
    root = Path(folder).resolve()
    pipeline = (root / "transformer" / "config.json").is_file()
    transformer = root / "transformer" if pipeline else root
    if not (transformer / "config.json").is_file() or not (transformer / DIT_FILE).is_file():
        want = f"a DiTTransformer2DModel folder (config.json, {DIT_FILE}) or a DiTPipeline root"
        raise ConfigError(expected(want, str(root)) + bin_note(transformer))
    try:
        config = DiffusersDiTConfig.from_diffusers(_json(transformer / "config.json"))
    except ConfigError as exc:
        raise ConfigError(f"{transformer / 'config.json'}: {exc}") from None
    check_tensors(
        tensor_shapes(transformer / DIT_FILE), model_shapes(config), f"the DiT {transformer / DIT_FILE}"
    )
    if not pipeline:
        return DiTFolder(transformer, config, DIT_OBJECTIVE)
    scheduler = root / "scheduler" / "scheduler_config.json"
    objective = objective_of(_json(scheduler) if scheduler.is_file() else None, str(scheduler))
    index = _json(root / "model_index.json") if (root / "model_index.json").is_file() else {}
    vae = root / "vae" if (root / "vae" / "config.json").is_file() else None
    return DiTFolder(transformer, config, objective, _id2label_names(index, config.num_classes), vae)


def _space(dits: list[DiTFolder], class_names, value_range) -> SampleSpace:
    """The one sample space every DiT shares; ConfigError naming the first that differs."""
    first = dits[0]
    for d in dits[1:]:
        if (d.latent_shape, d.config.num_classes) != (first.latent_shape, first.config.num_classes):
            raise ConfigError(
                expected(
                    f"every DiT on {first.latent_shape} latents with {first.config.num_classes} classes "
                    f"(as {first.transformer})",
                    f"{d.latent_shape}, {d.config.num_classes} classes at {d.transformer}",
                )
            )
    n = first.config.num_classes
    names = class_names if class_names is not None else first.class_names or [str(i) for i in range(n)]
    return SampleSpace(first.latent_shape, tuple(value_range), n, tuple(names))


def _label_sets(classes, count: int, experts: int) -> list[set[int]]:
    if classes is None:
        return [set(range(count))] * experts
    sets = [set(int(c) for c in cs) for cs in classes]
    if len(sets) != experts or any(not s or not s <= set(range(count)) for s in sets):
        raise ConfigError(expected(f"classes: {experts} non-empty sets of labels in 0..{count - 1}", classes))
    if set().union(*sets) != set(range(count)):
        raise ConfigError(
            expected("classes that cover every label", sorted(set(range(count)) - set().union(*sets)))
        )
    return sets


def _write_expert(
    folder: Path, i: int, dit: DiTFolder, space: SampleSpace, labels: set[int], encoder_id: str, dataset: str
) -> None:
    """OUT/expert_<i>/meta.json serving dit's safetensors in place."""
    digest = file_sha256(dit.weights)
    # the dataset's name says the DiT learnt the decoder's latent space: the importer's word, not measured
    latents = latent_dataset_name(dataset, encoder_id)
    partition = {
        "id": f"imported-{digest[:12]}",
        "dataset": latents,
        "split": "not recorded",
        "method": "imported",
    }
    counts = [1 if c in labels else 0 for c in range(space.num_classes)]  # which labels, not how many
    preset = next((p for p, c in PRESETS.items() if c == dit.config), None)
    meta = expert_meta(
        "torch", preset or "xl-2", i, partition, counts, architecture=ARCHITECTURE,
        objective=dit.objective, sample_space=space, steps=0,
        source={"format": "diffusers-dit", "folder": str(dit.transformer)}, weights=str(dit.weights),
    )  # fmt: skip
    meta = {**meta, "preset": preset or "imported", "config": dit.config.to_dict()}
    write_meta(folder, stamp_card(meta, digest))


def import_dit(
    dit_dirs: Sequence[str | Path],
    vae_dir: str | Path | None,
    out_dir: str | Path,
    *,
    class_names: Sequence[str] | None = None,
    classes: Sequence[Sequence[int]] | None = None,
    value_range: tuple[float, float] = DEFAULT_LATENT_RANGE,
    device: str = "auto",
    guidance: float = GUIDANCE,
    dataset: str = "imported",
    name: str | None = None,
    preview_samples: int = 2,
) -> Path:
    """Write out_dir (the module docstring) and return out_dir/deployment.toml. A stable signature (the CLI
    `ddm import dit` calls it):

    dit_dirs      DiTTransformer2DModel folders or DiTPipeline roots, one expert each (ids in this order)
    vae_dir       an AutoencoderKL folder; None: the first pipeline root's vae/
    out_dir       where deployment.toml, expert_<i>/ and decoder/ are written (created)
    class_names   one per label; default a pipeline's id2label, else "0", "1", ...
    classes       per expert, the labels it serves (default every label): disjoint sets -> oracle routing
    value_range   the scaled latents' range ([sample_space] and the decoder card)
    device        every expert's and the decoder's deployment device (auto, cpu, cuda, ...)
    guidance      the deployment's default guidance (DiTPipeline's 4.0)
    dataset       names the DiTs' training data in their cards ("<dataset>~<the VAE's encoder id>")
    name          the deployment's name (default: out_dir's folder name)
    preview_samples   decoded random latents the decoder card's preview is fitted on

    ConfigError (nothing served) for a folder that is not a DiT, tensors that do not match its config
    (the missing, unexpected and wrongly shaped listed), DiTs on different latents or class counts, a
    scheduler config the card cannot say, a VAE it cannot serve."""
    if isinstance(dit_dirs, str | Path) or not dit_dirs:
        raise ConfigError(expected("dit_dirs: a list of one or more DiT folders", dit_dirs))
    dits = [read_dit(d) for d in dit_dirs]
    space = _space(dits, class_names, value_range)
    vae = Path(vae_dir) if vae_dir is not None else dits[0].vae
    if vae is None:
        raise ConfigError(expected("a VAE folder (vae_dir, or a DiTPipeline root with vae/)", None))
    out = Path(out_dir)
    labels = _label_sets(classes, space.num_classes, len(dits))
    decoder = write_diffusers_decoder(vae, out / "decoder", space.shape, space.value_range, preview_samples)
    encoder_id = json.loads((decoder / "meta.json").read_text())["card"]["encoder_id"]
    for i, dit in enumerate(dits):
        _write_expert(out / f"expert_{i}", i, dit, space, labels[i], encoder_id, dataset)
    disjoint = sum(len(s) for s in labels) == space.num_classes
    deployment = Deployment.build(
        out / "deployment.toml",
        [(f"expert_{i}", device) for i in range(len(dits))],
        "oracle" if disjoint else "label-prior",
        name=name or out.resolve().name,
        guidance=float(guidance),
        sample_space=space,
        decoder={"checkpoint": "decoder", "device": device},
    )
    path = deployment.write(f"ddm import dit: {', '.join(str(d.transformer) for d in dits)}; VAE {vae}")
    from ddm.router.deployment_loader import (
        read_deployment,
    )  # the router's own checks, before anyone serves it

    read_deployment(Deployment.load(path))
    return path
