"""The docs keep up with the tree (issue 41): docs/ARCHITECTURE.md names every module of the packages
and every folder below them (a reader finds each file's job there; a new file without a line fails
here), docs/README.md links every doc, and every relative link in README.md, CONTRIBUTING.md and
docs/*.md resolves to a file (and heading)."""

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


FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _prose(text: str) -> str:
    """The text with fenced blocks and code spans blanked (a link inside code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _anchors(path: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown file: lower case, punctuation dropped, spaces to
    hyphens, a repeated one suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).replace("`", "").lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    return broken


def test_every_relative_link_resolves():
    """Every relative link and image in README.md, CONTRIBUTING.md and docs/*.md points to a file that
    exists (and, for a Markdown file with #anchor, to one of its headings)."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [line for page in pages for line in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)
