"""`ddm expert selftest` in-process: a row per bucket and PASS (exit 0) where the device agrees with the
CPU, FAIL naming the buckets (exit 1) where it does not, the deployment's device and precision as
defaults, and a clear error for a precision the device cannot honour.

Tiny random-weight checkpoints, buckets 1,2,4; `cpu-traced` stands in for a compiling device.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddm.ops.cli import main
from ddm.schema.deployment import Deployment
from ddm.workers import load_expert
from ddm.workers import selftest as selftest_module
from tests.support.checkpoints import good_and_perturbed

BUCKETS = (1, 2, 4)


def write_deployment(root: Path, device: str, precision: str | None = None) -> Path:
    expert = ("good", device, precision) if precision else ("good", device)
    return Deployment.build(root / f"{device}-{precision}.toml", [expert], name="selftest").write()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """good/: a tiny random torch expert; perturbed/: the same with one tensor changed."""
    root = tmp_path_factory.mktemp("expert_selftest")
    good_and_perturbed(root)
    return root


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    """cpu-traced buckets are cached in this test's folder; no deployment from the environment."""
    monkeypatch.setenv("DDM_TRACE_CACHE_DIR", str(tmp_path / "traced"))
    monkeypatch.delenv("DDM_DEPLOYMENT", raising=False)


def selftest(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["expert", "selftest", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def bucket_rows(out: str) -> dict[int, str]:
    rows = {}
    for line in out.splitlines():
        first = line.split()[:1]
        if first and first[0].isdigit():
            rows[int(first[0])] = line
    return rows


def test_cpu_traced_passes_with_a_row_per_bucket(root, capsys):
    deployment = write_deployment(root, "cpu")
    code, out, err = selftest(
        capsys,
        "--deployment",
        str(deployment),
        "--expert",
        "0",
        "--device",
        "cpu-traced",
        "--buckets",
        "1,2,4",
    )
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[-1].startswith("PASS")
    assert "on cpu-traced, precision fp32" in lines[0] and str(root / "good") in lines[0]
    rows = bucket_rows(out)
    assert sorted(rows) == list(BUCKETS)
    assert all(row.split()[-1] == "ok" for row in rows.values())


def test_json_has_ok_and_a_check_per_bucket(root, capsys, tmp_path):
    deployment = write_deployment(root, "cpu-traced")  # the deployment's device is the default
    argv = ("--deployment", str(deployment), "--expert", "0", "--buckets", "1,2,4", "--json")
    code, out, _ = selftest(capsys, *argv)
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True
    assert (report["framework"], report["device"], report["precision"]) == ("torch", "cpu-traced", "fp32")
    assert [c["bucket"] for c in report["checks"]] == list(BUCKETS)
    assert all(c["ok"] is True and c["error"] <= c["tolerance"] == 1e-4 for c in report["checks"])
    assert report["compile_report"]["compiled"] == 3 and report["compile_report"]["loaded"] == 0
    assert len(list((tmp_path / "traced").glob("*.pt"))) == 3
    code, out, _ = selftest(capsys, *argv)  # again: every bucket from the trace cache
    assert code == 0 and json.loads(out)["compile_report"]["loaded"] == 3


def test_the_deployments_precision_and_the_environments_deployment_are_the_defaults(
    root, capsys, monkeypatch
):
    monkeypatch.setenv("DDM_DEPLOYMENT", str(write_deployment(root, "cpu", "bf16")))
    code, out, _ = selftest(capsys, "--expert", "0", "--buckets", "1,2", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    assert (report["device"], report["precision"]) == ("cpu", "bf16")
    assert all(c["tolerance"] == 1e-1 for c in report["checks"]) and len(report["checks"]) == 2
    code, out, _ = selftest(capsys, "--expert", "0", "--buckets", "1", "--precision", "fp32", "--json")
    assert code == 0 and json.loads(out)["precision"] == "fp32"  # the flag wins


def test_a_mismatch_exits_1_naming_the_buckets(root, capsys, monkeypatch):
    """The reference computes something else (as a device with wrong weights would): every bucket fails."""

    def perturbed_reference(path, buckets):
        return load_expert(root / "perturbed", "cpu", buckets=buckets, precision="fp32")

    monkeypatch.setattr(selftest_module, "load_reference", perturbed_reference)
    deployment = write_deployment(root, "cpu-traced")
    code, out, err = selftest(capsys, "--deployment", str(deployment), "--expert", "0", "--buckets", "1,2,4")
    assert code == 1, out + err
    assert out.splitlines()[-1].startswith("FAIL: bucket 1, 2, 4")
    assert all(row.split()[-1] == "MISMATCH" for row in bucket_rows(out).values())
    code, out, _ = selftest(
        capsys, "--deployment", str(deployment), "--expert", "0", "--buckets", "4", "--json"
    )
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["checks"][0]["ok"] is False


def test_a_precision_the_device_lacks_fails_at_once_with_the_choices(root, capsys):
    """ConfigError: input that does not fit, exit 2 (ops/cli/exit_codes.py), named on stderr and, with
    --json, on stdout."""
    deployment = write_deployment(root, "cpu")
    argv = ("--deployment", str(deployment), "--expert", "0", "--device", "cpu", "--precision", "tf32")
    code, out, err = selftest(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("ddm expert: error: precision tf32 is not available on cpu")
    assert "fp32" in err and "bf16" in err
    code, out, _ = selftest(capsys, *argv, "--json")
    report = json.loads(out)
    assert (
        code == 2 and report["ok"] is False and report["kind"] == "ConfigError" and report["exit_code"] == 2
    )
    code, _, err = selftest(capsys, *argv[:-1], "bf16", "--device", "cpu-traced")
    assert code == 2 and "precision bf16 is not available on cpu-traced" in err


def test_a_precision_that_does_not_exist_is_a_usage_error(root, capsys):
    deployment = write_deployment(root, "cpu")
    with pytest.raises(SystemExit) as info:
        selftest(capsys, "--deployment", str(deployment), "--expert", "0", "--precision", "fp16")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "fp16" in err and "fp32" in err and "tf32" in err and "bf16" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--expert", "3"), "expert id"),
        (("--expert", "0", "--buckets", "1,two"), "--buckets like 1,2,4,8"),
        (("--expert", "0", "--device", "tpu"), "expected a torch device"),
    ],
)
def test_bad_input_says_what_was_expected(root, capsys, argv, words):
    deployment = write_deployment(root, "cpu")
    code, _, err = selftest(capsys, "--deployment", str(deployment), *argv)
    assert code == 2 and words in err, err  # input that does not fit: a usage error
