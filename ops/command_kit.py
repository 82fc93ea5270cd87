"""What every command-line entry in ops shares, whether it lives in cli/ or beside its room's logic
(bench, fuzz, up): the one --deployment flag and the one way `--json` output is printed. It sits below
cli/ so that no room climbs into cli/ for them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_deployment_flag(parser: argparse.ArgumentParser, *, required: bool = False, what: str = "") -> None:
    """The one --deployment flag: a deployment TOML, resolved by schema.deployment.resolve_deployment
    when left out ($DDM_DEPLOYMENT, else the shipped one). what: more words for this command's help."""
    from ddm.schema.deployment import DEFAULT_DEPLOYMENT

    where = "" if required else f" (default: $DDM_DEPLOYMENT, else {DEFAULT_DEPLOYMENT})"
    parser.add_argument(
        "--deployment", type=Path, default=None, required=required, help=f"deployment TOML{what}{where}"
    )


def _jsonable(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):  # numpy arrays
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def print_json(data: object) -> None:
    """`--json` output: one object or list on stdout, nothing else there."""
    print(json.dumps(data, indent=2, default=_jsonable), file=sys.stdout, flush=True)
