"""Every `ddm` command answers --help (exit 0) and a bare `ddm` lists the commands."""

from __future__ import annotations

import pytest

from ddm.ops.cli import COMMANDS, main


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse exits for --help and usage errors
        return int(exc.code or 0)


@pytest.mark.parametrize(
    "argv",
    [[name, "--help"] for name, _, _ in COMMANDS]
    + [["worker", "expert", "--help"], ["worker", "router", "--help"]],
)
def test_every_command_has_help(argv, capsys):
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ddm {' '.join(argv[:-1])}")


def test_bare_ddm_lists_the_commands(capsys):
    assert run([]) == 2
    out = capsys.readouterr().out
    for name, _, help_text in COMMANDS:
        assert name in out and help_text.split()[0] in out
    assert "up" in out and "submit" in out and "status" in out


def test_top_level_help(capsys):
    assert run(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name, _, _ in COMMANDS)


def test_unknown_command_is_a_usage_error(capsys):
    assert run(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err
