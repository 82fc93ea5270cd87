"""Small files with one job each (DESIGN.md habit 10), measured: no Python file of the packages or ops
over 450 lines and no function over 80 (issue 41, "the rules kept"), and no script of the web page over
450 lines either (its ES modules: webui/static/**/*.js; the vendored Socket.IO client is exempt). Tests
are not held to it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("schema", "ddm", "workers", "router", "webui", "ops")
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80
VENDORED_JS = ("socket.io.min.js",)  # webui/static/VENDOR.md: not ours to split


def python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def oversized(path: Path) -> list[str]:
    """What in `path` breaks the rule: the file's length, then each long function (methods, nested)."""
    text = path.read_text()
    name = path.relative_to(ROOT)
    found = []
    if len(text.splitlines()) > MAX_FILE_LINES:
        found.append(f"{name}: {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_file_or_function_is_too_long():
    found = [line for path in python_files() for line in oversized(path)]
    assert not found, f"over {MAX_FILE_LINES} lines a file or {MAX_FUNCTION_LINES} a function: {found}"


def test_the_check_sees_a_long_function(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.test_sizes.ROOT", tmp_path)
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    assert oversized(long) == [f"long.py:1 f: {MAX_FUNCTION_LINES + 1} lines"]


def page_scripts() -> list[Path]:
    return sorted(p for p in (ROOT / "webui" / "static").rglob("*.js") if p.name not in VENDORED_JS)


def test_no_script_of_the_page_is_too_long():
    scripts = page_scripts()
    assert any(p.parent.name == "js" for p in scripts)  # the subfolder's modules are measured too
    lengths = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in scripts}
    found = [f"{name}: {n} lines" for name, n in lengths.items() if n > MAX_FILE_LINES]
    assert not found, f"over {MAX_FILE_LINES} lines a script: {found}"
