"""What every `ddm` command shares: --version, defaults in --help, one map of errors to exit codes
(0 success, 1 runtime failure, 2 usage), --json on stdout, and the flags made consistent (--n, --local)."""

from __future__ import annotations

import argparse
import json

import pytest

from ddm.client import JobCancelledError, JobFailedError, JobNotFoundError, JobTimeoutError, NoDeploymentError
from ddm.ops.cli import COMMANDS, build_parser, main
from ddm.ops.cli.exit_codes import FAILURE, USAGE, exit_code
from ddm.schema.errors import ConfigError, DDMError, DeviceError, SchemaError, ServiceUnavailableError


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse exits for --help, --version and usage errors
        return int(exc.code or 0)


def test_version_from_the_package_metadata(capsys):
    from importlib.metadata import version

    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ddm {version('ddm-pipeline')}"


def _options(parser: argparse.ArgumentParser, path: list[str]):
    """(command path, parser, action) of every option of `parser` and of its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _options(child, [*path, name])
        elif action.option_strings:
            yield path, parser, action


@pytest.mark.parametrize("command", [name for name, _, _ in COMMANDS])
def test_every_default_is_in_the_help(command):
    shown = 0
    for path, parser, action in _options(build_parser([command]), []):
        default = action.default
        if default is None or default is False or default == argparse.SUPPRESS:
            continue  # nothing to show: the help says where the value comes from, or a flag is off
        text = parser._get_formatter()._expand_help(action) if action.help else ""
        assert "default" in text, f"ddm {' '.join(path)} {action.option_strings[0]}: {text!r}"
        shown += 1
    assert command not in ("sample", "submit", "eval") or shown > 0


def test_exit_codes_map_runtime_failures_to_1_and_bad_input_to_2():
    for exc in (
        JobFailedError("j", "boom"),
        JobCancelledError("j", 3, 50),
        JobNotFoundError("no job j"),
        JobTimeoutError("late"),
        ServiceUnavailableError("no Redis"),
        NoDeploymentError("no router"),
        DeviceError("no cuda"),
        DDMError("other"),
    ):
        assert exit_code(exc) == FAILURE, exc
    for exc in (SchemaError("expected steps in 1..1000"), ConfigError("no such deployment")):
        assert exit_code(exc) == USAGE, exc


def test_usage_errors_exit_2(capsys):
    assert run(["status", "--no-such-flag"]) == 2
    assert run(["submit", "--steps", "many"]) == 2
    assert run(["status"]) == 2  # neither a job nor --recent: a ConfigError
    assert "expected a JOB id or --recent N" in capsys.readouterr().err


def test_a_service_down_exits_1_and_json_says_so(monkeypatch, capsys):
    monkeypatch.setenv("DDM_REDIS_URL", "redis://127.0.0.1:1/0")  # a closed port
    assert run(["status", "some-job", "--json"]) == 1
    out = capsys.readouterr()
    error = json.loads(out.out)
    assert (error["ok"], error["kind"], error["exit_code"]) == (False, "ServiceUnavailableError", 1)
    assert "no Redis answered at redis://127.0.0.1:1/0" in error["error"] and "error:" in out.err
    for argv in (["result", "j"], ["cancel", "j"], ["workers"]):
        assert run(argv) == 1, argv


def test_sample_needs_no_local_flag_and_still_accepts_it():
    for argv in (["sample", "--label", "3"], ["sample", "--local", "--label", "3"]):
        args = build_parser(argv).parse_args(argv)
        assert args.label == "3"  # a label or a class name: read in the deployment's space (job_labels)


def test_eval_counts_images_per_label_like_sample_or_in_total():
    parse = lambda *argv: build_parser(["eval"]).parse_args(["eval", "--out", "o", *argv])  # noqa: E731
    assert (parse("--n", "20").n, parse("--n", "20").total) == (20, None)
    assert parse("--total", "500").total == 500
    with pytest.raises(SystemExit):
        parse("--n", "2", "--total", "20")  # one or the other
