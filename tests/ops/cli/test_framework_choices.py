"""The CLI's framework flags (`train expert --framework`, `distill --framework`, `convert --to`) offer
what the registry of expert frameworks (ddm.workers.frameworks) holds, and `ddm convert` refuses a
checkpoint whose meta.json names a framework the registry does not know, naming the known ones."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from ddm.ops.cli import build_parser, main
from ddm.ops.cli.exit_codes import USAGE
from ddm.schema.checkpoint_meta import write_meta
from ddm.workers.checkpoint import expert_meta
from ddm.workers.frameworks import FRAMEWORKS, TORCH, framework_names

# (the argv that configures the command, the subcommand path, the flag)
FLAGS = [
    (["train"], ["train", "expert"], "--framework"),
    (["distill"], ["distill"], "--framework"),
    (["convert"], ["convert"], "--to"),
]


def flag(parser: argparse.ArgumentParser, path: list[str], option: str) -> argparse.Action:
    for name in path:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = subparsers.choices[name]
    return next(a for a in parser._actions if option in a.option_strings)


@pytest.mark.parametrize(("argv", "path", "option"), FLAGS, ids=[" ".join(p) for _, p, _ in FLAGS])
def test_the_registry_drives_the_choices(monkeypatch, argv, path, option):
    assert flag(build_parser(argv), path, option).choices == sorted(FRAMEWORKS) == framework_names()
    monkeypatch.setitem(FRAMEWORKS, "mlx", dataclasses.replace(TORCH, name="mlx"))
    choices = flag(build_parser(argv), path, option).choices
    assert "mlx" in choices and choices == framework_names()


def test_convert_refuses_an_unknown_framework_in_meta_json(tmp_path, capsys):
    src = tmp_path / "src"
    meta = expert_meta("torch", "tiny", 0, {"id": "abc"}, [1] * 10)
    write_meta(src, {**meta, "framework": "mlx"})
    (src / TORCH.weights_file).write_bytes(b"")
    assert main(["convert", str(src), "--to", "jax", "--out", str(tmp_path / "out")]) == USAGE
    known = ", ".join(framework_names())
    assert f"meta.json framework one of {known}, got 'mlx'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
