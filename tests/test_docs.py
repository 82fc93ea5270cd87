"""The docs keep up with the tree (issue 41): docs/ARCHITECTURE.md names every module of the packages
and every folder below them (a reader finds each file's job there; a new file without a line fails
here), and docs/README.md links every doc."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schema", "ddm/runtime", "ddm/client", "workers", "router", "webui", "ops")


def named_in_doc() -> set[str]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    return set(re.findall(r"[A-Za-z0-9_]+\.py", text)) | set(re.findall(r"([A-Za-z0-9_]+)/", text))


def unnamed(package: str, named: set[str]) -> list[str]:
    folder = ROOT / package
    missing = [
        f"{package}/{path.name}"
        for path in sorted(folder.glob("*.py"))
        if path.name != "__init__.py" and path.name not in named
    ]
    missing += [
        f"{package}/{path.name}/"
        for path in sorted(folder.iterdir())
        if path.is_dir() and (path / "__init__.py").exists() and path.name not in named
    ]
    return missing


def test_every_module_and_subpackage_has_its_line():
    named = named_in_doc()
    missing = [name for package in PACKAGES for name in unnamed(package, named)]
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


def test_the_docs_index_links_every_doc():
    index = (ROOT / "docs" / "README.md").read_text()
    docs = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "README.md"]
    missing = [name for name in [*docs, "../CONTRIBUTING.md"] if f"]({name})" not in index]
    assert not missing, f"docs/README.md does not link: {missing}"
