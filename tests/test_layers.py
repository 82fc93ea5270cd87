"""The house's floors, read from the imports themselves (an AST walk over every module, lazy imports
inside functions included), not from a grep:

    ops          may import anything below it; nothing imports ops
    webui        schema, runtime, client                  (never workers or router internals)
    router       schema, runtime, client, workers
    workers      schema, runtime
    client       schema, runtime                          (ddm.client: the public client library)
    runtime      schema                                   (broker and Redis plumbing, the consumer runtime)
    schema       nothing of ours

and no import circle between modules. docs/ARCHITECTURE.md draws the same picture."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> its folder (pyproject.toml's package-dir)
FOLDERS = {
    "ddm.schema": ROOT / "schema",
    "ddm.runtime": ROOT / "ddm" / "runtime",
    "ddm.client": ROOT / "ddm" / "client",
    "ddm.workers": ROOT / "workers",
    "ddm.router": ROOT / "router",
    "ddm.webui": ROOT / "webui",
    "ddm.ops": ROOT / "ops",
}
ALLOWED = {
    "ddm.schema": {"ddm.schema"},
    "ddm.runtime": {"ddm.schema", "ddm.runtime"},
    "ddm.client": {"ddm.schema", "ddm.runtime", "ddm.client"},
    "ddm.workers": {"ddm.schema", "ddm.runtime", "ddm.workers"},
    "ddm.router": {"ddm.schema", "ddm.runtime", "ddm.client", "ddm.workers", "ddm.router"},
    "ddm.webui": {"ddm.schema", "ddm.runtime", "ddm.client", "ddm.webui"},
    "ddm.ops": set(FOLDERS),
}


def modules() -> dict[str, Path]:
    """Every module of ours by its dotted name."""
    out = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ours (in `known`) that `name` imports, anywhere in its body, relative imports
    resolved. `from pkg import sub` counts as importing pkg.sub when that is a module, else pkg."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            subs = {f"{module}.{alias.name}" for alias in node.names} & known
            found |= subs if len(subs) == len(node.names) else subs | {module}
    return {m for m in found if m in known and m != name}


def package_of(module: str) -> str | None:
    return next((p for p in FOLDERS if module == p or module.startswith(p + ".")), None)


def graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports."""
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def forbidden(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        package = package_of(module)
        for target in sorted(targets):
            if package_of(target) not in ALLOWED[package]:
                bad.append(f"{module} imports {target} ({package} may import {sorted(ALLOWED[package])})")
    return bad


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_import_stays_on_its_floor_or_goes_down():
    assert forbidden(graph()) == []


def test_no_import_circles():
    assert cycles(graph()) == []


def test_nothing_imports_ops_or_webui_from_below():
    edges = graph()
    for module, targets in edges.items():
        if package_of(module) != "ddm.ops":
            assert not [t for t in targets if package_of(t) == "ddm.ops"], module
        if package_of(module) not in ("ddm.ops", "ddm.webui"):
            assert not [t for t in targets if package_of(t) == "ddm.webui"], module


# why each is refused -> (the module it is planted in, the import)
PLANTED = {
    "schema imports nothing of ours": ("ddm.schema.flow", "import ddm.workers.batcher\n"),
    "runtime imports only schema": ("ddm.runtime.amqp", "from ddm.router import scheduler\n"),
    "webui never imports router": ("ddm.webui.routes", "from ddm.router.scheduler import Scheduler\n"),
    "lazy ones count": ("ddm.workers.worker", "def f():\n    from ddm.ops.cleanup import cleanup_prefix\n"),
}


@pytest.mark.parametrize("why", list(PLANTED))
def test_the_rules_catch_a_forbidden_import(why, tmp_path):
    module, source = PLANTED[why]
    edges = graph()
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    edges[module] = edges.get(module, set()) | imports_of(module, planted, set(modules()))
    assert forbidden(edges), why


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
