"""README's quick start, followed literally in a checkout, leaves nothing git shows as new: every image it
tells a command to write where it runs (`--out digits.png`, `open("digits.png", "wb")`, samples.png) is
git-ignored (issue 40: digits.png, threes.png and hearts.png showed up as untracked)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_the_quick_start_writes_is_ignored():
    text = (ROOT / "README.md").read_text()
    written = set(re.findall(r"--out ([\w.-]+\.png)\b", text)) | set(
        re.findall(r'open\("([\w.-]+\.png)"', text)
    )
    written.add("samples.png")  # `ddm sample`'s default
    assert {"digits.png", "threes.png", "hearts.png"} <= written
    got = subprocess.run(["git", "check-ignore", *sorted(written)], cwd=ROOT, capture_output=True, text=True)
    assert set(got.stdout.split()) == written, f"not ignored: {sorted(written - set(got.stdout.split()))}"
