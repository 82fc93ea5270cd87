"""`ddm import paris DIR --out OUT`: a deployment that serves Bagel's Paris folder in place.

Paris's folder (issue 38's facts; workers/paris/__init__.py):

    DIR/config.json                       num_experts, image_size, num_channels, vae_name, text_encoder_name
    DIR/expert_<i>/diffusion_pytorch_model.safetensors   (+ config.json)
    DIR/router/pytorch_model.safetensors                 (+ config.json)
    DIR/vae/                              a diffusers AutoencoderKL folder
    DIR/text_encoder/, DIR/tokenizer/     transformers' CLIPTextModel and CLIPTokenizer folders

What OUT holds (nothing of Paris's is copied: every meta.json names its file and that file's sha256):

    OUT/deployment.toml     experts, the router, [decoder], [text_encoder], [conditioning.text] (CLIP's
                            77 tokens), and Paris's own sampling as the defaults: guidance 7.5 against
                            the empty prompt, top-2 renormalised, diffusers' flow-matching timesteps
    OUT/expert_<i>/meta.json   architecture "paris", its card: flow-velocity with time convention t0-data
                            (Paris's s = t / 1000 runs from data to noise and it predicts noise minus
                            data, d x / d s), converted at the expert like any objective
    OUT/router/meta.json    architecture "paris" (router/paris_router.py runs it in the router worker)
    OUT/decoder/meta.json   the VAE, latents scaled by its scaling_factor (0.18215 for SD's)

Every safetensors file is checked from its header (names and shapes, nothing loaded) against the
architecture its shapes imply, and refused with the lists of missing, unexpected and wrongly shaped
tensors. Depth and widths come from the weights; the heads, which no shape holds, from the model's
config.json where it names them (num_heads / num_attention_heads), else Paris's (16 and 12).

The real Paris weights were never seen here (the repository is gated): this is proven on fixtures in its
exact layout (tests/support/paris_fixture.py). A real checkpoint that holds tensors the public port does
not build would be refused as "unexpected", naming them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.checkpoint_meta import file_sha256, utc_now, write_meta
from ddm.schema.conditioning import Conditioning, TextEncoderSpec
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, expected
from ddm.schema.expert_card import FLOW_VELOCITY, T0_DATA, Objective, stamp_card
from ddm.schema.sample_space import SampleSpace
from ddm.workers.autoencoder.diffusers_card import DEFAULT_LATENT_RANGE, write_diffusers_decoder
from ddm.workers.checkpoint import expert_meta
from ddm.workers.paris.config import (
    ParisExpertConfig,
    ParisRouterConfig,
    expert_config_from,
    expert_shapes,
    router_config_from,
    router_shapes,
)
from ddm.workers.paris.weights import check_tensors, tensor_shapes

EXPERT_FILE = "diffusion_pytorch_model.safetensors"
ROUTER_FILE = "pytorch_model.safetensors"
# Paris's sampling (Bagel's code and the public port): what its deployment gives a job that names none
GUIDANCE = 7.5
STRATEGY = "topk:2"
GRID = "flowmatch"
STEPS_NOTE = "steps: 50 in the public port, 30 in Baguette, 20 in Bagel's hosted API"
EXAMPLE_PROMPTS = ("a red apple on a wooden table", "a lighthouse at dusk", "a corgi wearing sunglasses")


@dataclass(frozen=True)
class ParisFolder:
    """A Paris folder, read and checked: its top config and every model's config from its weights."""

    root: Path
    experts: tuple[ParisExpertConfig, ...]
    router: ParisRouterConfig
    text: TextEncoderSpec
    space: SampleSpace

    def expert_file(self, i: int) -> Path:
        return self.root / f"expert_{i}" / EXPERT_FILE

    @property
    def router_file(self) -> Path:
        return self.root / "router" / ROUTER_FILE


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"a Paris folder has {path.name} here: {path} is missing") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(expected(f"{path}: a JSON object", type(data).__name__))
    return data


def _heads(folder: Path, default: int) -> int:
    """The model's head count from its config.json where it names one (no tensor's shape holds it)."""
    config = _json(folder / "config.json") if (folder / "config.json").is_file() else {}
    for key in ("num_heads", "num_attention_heads"):
        if isinstance(config.get(key), int) and not isinstance(config[key], bool):
            return config[key]
    return default


def _top_int(top: dict, key: str, source: Path) -> int:
    value = top.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{source}: {expected(f'{key} a positive int', value)}")
    return value


def read_paris(root: str | Path) -> ParisFolder:
    """Read and check a Paris folder without loading a tensor: ConfigError naming what is wrong."""
    from ddm.workers.clip_text_encoder import clip_text_spec

    root = Path(root).resolve()
    top = _json(root / "config.json")
    count = _top_int(top, "num_experts", root / "config.json")
    size = _top_int(top, "image_size", root / "config.json")
    channels = _top_int(top, "num_channels", root / "config.json")
    text = clip_text_spec(root / "text_encoder", root / "tokenizer", encoder_id=_encoder_id(top))
    experts = []
    for i in range(count):
        path = root / f"expert_{i}" / EXPERT_FILE
        shapes = tensor_shapes(_present(path))
        config = expert_config_from(shapes, _heads(path.parent, 16), text.max_tokens)
        check_tensors(shapes, expert_shapes(config), f"Paris expert {i} ({path})")
        experts.append(config)
    path = root / "router" / ROUTER_FILE
    shapes = tensor_shapes(_present(path))
    router = router_config_from(shapes, _heads(path.parent, 12))
    check_tensors(shapes, router_shapes(router), f"Paris's router ({path})")
    _check_agree(root, experts, router, text, (channels, size, count))
    space = SampleSpace((channels, size, size), DEFAULT_LATENT_RANGE)  # the VAE decoder's card declares it
    return ParisFolder(root, tuple(experts), router, text, space)


def _encoder_id(top: dict) -> str | None:
    name = top.get("text_encoder_name")
    return name if isinstance(name, str) and "/" in name else None  # a hub id, not a folder name


def _present(path: Path) -> Path:
    if not path.is_file():
        raise ConfigError(f"a Paris folder has {path.relative_to(path.parents[1])}: {path} is missing")
    return path


def _check_agree(root: Path, experts, router, text: TextEncoderSpec, top: tuple[int, int, int]) -> None:
    """Every model reads the top config's latents, the router scores every expert, and every expert
    reads the text encoder's width."""
    channels, size, count = top
    for i, c in enumerate(experts):
        if (c.channels, c.image_size) != (channels, size):
            got = f"{c.channels} channels at {c.image_size}x{c.image_size}"
            raise ConfigError(f"{root}/expert_{i}: {expected(f'{channels} channels at {size}x{size}', got)}")
        if c.text_width != text.width:
            want = f"text_proj reading the text encoder's width {text.width}"
            raise ConfigError(f"{root}/expert_{i}: {expected(want, c.text_width)}")
    if (router.channels, router.image_size, router.num_experts) != (channels, size, count):
        got = f"{router.channels}x{router.image_size}x{router.image_size} -> {router.num_experts} experts"
        want = f"{channels}x{size}x{size} -> {count} experts"
        raise ConfigError(f"{root}/router: {expected(want, got)}")


def _identity(paris: ParisFolder) -> dict:
    """What stands for a partition manifest: Paris's experts were trained elsewhere, on its clusters."""
    return {"id": "paris-" + file_sha256(paris.root / "config.json")[:12], "source": str(paris.root)}


def _write_expert(paris: ParisFolder, i: int, framework: str, out: Path) -> Path:
    weights = paris.expert_file(i)
    meta = expert_meta(
        framework,
        "imported",
        i,
        _identity(paris),
        [],
        architecture="paris",
        objective=Objective(FLOW_VELOCITY, None, T0_DATA),
        sample_space=paris.space,
        conditioning=Conditioning("text", paris.text),
        config=paris.experts[i],
        weights=str(weights),
        imported={"format": "paris", "from": str(weights), "at": utc_now()},
    )
    folder = out / f"expert_{i}"
    write_meta(folder, stamp_card(meta, file_sha256(weights)))
    return folder


def _write_router(paris: ParisFolder, out: Path) -> Path:
    meta = {
        "kind": "router",
        "framework": "torch",
        "architecture": "paris",
        "config": paris.router.to_dict(),
        "partition": _identity(paris),
        "weights": str(paris.router_file),
        "weights_sha256": file_sha256(paris.router_file),
        "imported": {"format": "paris", "from": str(paris.router_file), "at": utc_now()},
    }
    write_meta(out / "router", meta)
    return out / "router"


def import_paris(root: str | Path, out: str | Path, jax_experts: frozenset[int] = frozenset()) -> Path:
    """Write OUT (deployment.toml and the meta.json of every stage) for the Paris folder `root`; the
    experts in `jax_experts` are served by Flax (Paris's state dict converted at load), the rest by
    PyTorch. Returns the deployment file. ConfigError (nothing written) when the folder is not Paris's."""
    paris = read_paris(root)
    out = Path(out).resolve()
    if unknown := sorted(set(jax_experts) - set(range(len(paris.experts)))):
        raise ConfigError(expected(f"--jax expert ids in 0..{len(paris.experts) - 1}", unknown))
    # the VAE first: its folder is checked by loading it (the preview is fitted on its decodes), so a bad
    # vae/ is refused before any meta.json is written
    decoder = write_diffusers_decoder(paris.root / "vae", out / "decoder", paris.space.shape)
    experts = [
        _write_expert(paris, i, "jax" if i in jax_experts else "torch", out)
        for i in range(len(paris.experts))
    ]
    router = _write_router(paris, out)
    deployment = Deployment.build(
        out / "deployment.toml",
        experts,
        "learned",
        router,
        name=f"paris-{paris.root.name}",
        guidance=GUIDANCE,
        strategy=STRATEGY,
        on_expert_loss="wait",
        sample_space=paris.space,
        conditioning=Conditioning("text", paris.text),
        decoder={"checkpoint": str(decoder), "device": "auto"},
        text_encoder={
            "checkpoint": str(paris.root / "text_encoder"),
            "tokenizer": str(paris.root / "tokenizer"),
        },
        sampling={"solver": "euler", "grid": GRID, "grids": [GRID, "uniform", "shift:3", "edm"]},
        example_prompts=list(EXAMPLE_PROMPTS),
    )
    comment = (
        f"Bagel's Paris, imported from {paris.root} by `ddm import paris` (served in place).\n"
        f"Its own sampling: CFG {GUIDANCE} against the empty prompt, top-2 renormalised, diffusers'\n"
        f"flow-matching timesteps ({STEPS_NOTE})."
    )
    return deployment.write(comment)
