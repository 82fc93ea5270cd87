"""The one argument parser class of `ddm`: every command and subcommand parser is one (argparse builds
subparsers from their parent's class), so each `--help` shows its defaults the same way."""

from __future__ import annotations

import argparse


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
