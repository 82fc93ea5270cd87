"""The one argument parser class of `ddm`: every command and subcommand parser is one (argparse builds
subparsers from their parent's class), so each `--help` shows its defaults the same way."""

from __future__ import annotations

import argparse
from pathlib import Path


class HelpFormatter(argparse.HelpFormatter):
    """An option's default appended to its help as "(default: X)", unless the help already says its
    default or there is none worth saying (None: the help says where the value comes from; False: a
    flag that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text
            or default is None
            or default is False
            or default == argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


class EpilogFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """HelpFormatter that keeps the description and epilog as written (the top-level command list)."""


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser with HelpFormatter unless told otherwise."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def add_deployment_flag(parser: argparse.ArgumentParser, *, required: bool = False, what: str = "") -> None:
    """The one --deployment flag: a deployment TOML, resolved by schema.deployment.resolve_deployment
    when left out ($DDM_DEPLOYMENT, else the shipped one). what: more words for this command's help."""
    from ddm.schema.deployment import DEFAULT_DEPLOYMENT

    where = "" if required else f" (default: $DDM_DEPLOYMENT, else {DEFAULT_DEPLOYMENT})"
    parser.add_argument(
        "--deployment", type=Path, default=None, required=required, help=f"deployment TOML{what}{where}"
    )
