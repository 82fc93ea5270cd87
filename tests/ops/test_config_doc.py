"""docs/CONFIG.md is generated from the settings code and lists every DDM_* variable the code reads."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ddm.ops.config_doc import COMMAND, render
from ddm.schema.settings import ENV_VARS, HELP, Settings
from ddm.webui.config import UI_ENV_VARS, UI_HELP, UIConfig

REPO = Path(__file__).resolve().parents[2]
CONFIG_MD = REPO / "docs" / "CONFIG.md"
PACKAGES = ("ddm", "schema", "workers", "router", "ops", "webui")


def test_the_committed_file_is_the_generated_one():
    assert CONFIG_MD.read_text() == render(), f"docs/CONFIG.md is stale: run `{COMMAND}`"


def test_every_setting_has_its_variable_and_its_help():
    assert set(ENV_VARS) == {f.name for f in dataclasses.fields(Settings)}
    assert set(HELP) == set(ENV_VARS), "a Settings field without help text in schema/settings.py HELP"
    assert set(UI_HELP) == set(UI_ENV_VARS) <= {f.name for f in dataclasses.fields(UIConfig)}


def test_every_variable_the_code_reads_is_documented():
    documented = set(re.findall(r"`(DDM_[A-Z0-9_]+)`", CONFIG_MD.read_text()))
    read = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            read |= set(re.findall(r"\bDDM_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert read <= documented, f"read by the code but not in docs/CONFIG.md: {sorted(read - documented)}"
