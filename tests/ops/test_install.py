"""The install layers (pyproject.toml): a fresh venv with only the base install submits a job to a
stack running from this venv, follows it and saves a PNG, with no torch, JAX or Flask in it; a command
whose extra is missing says which extra to install; constraints.txt pins every dependency."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from PIL import Image

from tests.support.harness import Pipeline

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CONSTRAINTS = REPO / "constraints.txt"
# What a build of the package reads: the metadata files and the package folders (not .venv, .git, runs)
SOURCE = ("pyproject.toml", "README.md", "LICENSE", "ddm", "schema", "workers", "router", "ops", "webui")
HEAVY = ("torch", "jax", "flax", "optax", "flask", "flask_socketio", "gunicorn", "matplotlib", "safetensors")
INSTALL_BUDGET_S = 120.0  # 11 to 36 s here (a local wheel folder and index); a remote registry is slower


def _run(argv: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    """A venv with `pip install -c constraints.txt <a copy of this checkout>`: the base install only.
    Built from a copy so the build leaves nothing (build/, egg-info) in the checkout."""
    root = tmp_path_factory.mktemp("base-install")
    src = root / "src"
    for name in SOURCE:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    venv = root / "venv"
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", venv]).check_returncode()
    pip = _run([venv / "bin/python", "-m", "pip", "install", "-q", "-c", CONSTRAINTS, src])
    took = time.monotonic() - started
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert took < INSTALL_BUDGET_S, f"the base install took {took:.0f} s"
    print(f"base install: {took:.1f} s")
    return venv


def _probe(venv: Path, code: str) -> str:
    out = _run([venv / "bin/python", "-c", code], cwd=venv)  # not the checkout: its ddm/ would shadow
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_base_install_has_no_torch_jax_or_flask(base_venv):
    code = (
        "import importlib.util, sys; import ddm.client, ddm.ops.cli;"
        f"print([m for m in {HEAVY!r} if importlib.util.find_spec(m) is not None]);"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    present, imported = _probe(base_venv, code).splitlines()
    assert present == "[]" and imported == "[]"


SHIPPED = REPO / "checkpoints/mnist/deployment.toml"  # expert 0: PyTorch


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["ui"], "ui"),
        (["worker", "expert", "--deployment", SHIPPED, "--expert", "0"], "torch"),  # when it loads the expert
    ],
)
def test_a_command_without_its_extra_names_it(base_venv, argv, extra):
    # a broker nobody listens on: nothing here may reach the real one
    env = {"PATH": "/usr/bin:/bin", "DDM_AMQP_URL": "amqp://guest:guest@127.0.0.1:1/%2F", "DDM_PREFIX": "x."}
    out = _run([base_venv / "bin/ddm", *argv], cwd=base_venv, env=env)
    assert out.returncode == 1, out.stderr
    want = f"ddm {argv[0]} needs the {extra} extra: pip install 'ddm-pipeline[{extra}]'"
    assert out.stderr.strip().splitlines()[-1] == want


def test_up_names_every_missing_extra_before_it_starts_a_worker(base_venv):
    env = {"PATH": "/usr/bin:/bin", "DDM_AMQP_URL": "amqp://guest:guest@127.0.0.1:1/%2F", "DDM_PREFIX": "x."}
    out = _run([base_venv / "bin/ddm", "up", "--deployment", SHIPPED], cwd=base_venv, env=env)
    assert out.returncode == 1, out.stderr
    *_, last = out.stderr.strip().splitlines()
    assert last.startswith("ddm up: nothing was started: expert 0 (torch) needs the torch extra"), last
    assert "expert 1 (jax), the learned router need the jax extra" in last
    assert last.endswith("Install with: pip install 'ddm-pipeline[jax,torch,ui]'")


def test_the_children_of_up_run_the_installed_package_from_the_repository_root(base_venv):
    """`python -m` puts the working folder first on sys.path: from the repository root a child would
    import the checkout's thin ddm/ (no ddm.ops) instead of the installed package, and die."""
    code = "from ddm.ops.up.ui import ui_child; print('\\n'.join(ui_child('127.0.0.1', 1).argv))"
    argv = _probe(base_venv, code).splitlines()  # as the installed `ddm up` builds it
    assert argv[0] == str(base_venv / "bin/python")
    python_m = argv[: argv.index("ui")]
    out = _run([*python_m, "worker", "--help"], cwd=REPO)
    assert out.returncode == 0, out.stderr
    where = _run([*python_m[:-2], "-c", "import ddm.ops; print(ddm.ops.__file__)"], cwd=REPO)
    assert where.stdout.startswith(str(base_venv)), where.stdout + where.stderr


def test_every_command_shows_its_help_without_extras(base_venv):
    from ddm.ops.cli import COMMANDS

    for name, _, _ in COMMANDS:
        out = _run([base_venv / "bin/ddm", name, "--help"], cwd=base_venv)
        assert out.returncode == 0, (name, out.stderr)


@pytest.mark.slow
def test_the_base_install_submits_follows_and_saves_a_png(base_venv, label_split_deployment, tmp_path):
    with Pipeline(label_split_deployment, tmp_path) as pipeline:
        pipeline.up({"e0": 0, "e1": 1})  # from this venv: torch and JAX experts, the router
        env = {k: v for k, v in pipeline.env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        png = tmp_path / "out" / "grid.png"
        argv = [base_venv / "bin/ddm", "submit", "--labels", "0,5", "--n", "2", "--steps", "4"]
        out = _run([*argv, "--wait", "--timeout", "120", "--out", png], env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    assert len(job_id) > 8 and f"job {job_id} done" in out.stderr
    with Image.open(png) as img:
        assert img.format == "PNG" and img.width > 2 * 32 and img.height > 2 * 32  # 2 x 2 grid, upscaled


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[Requirement(name).name.lower().replace("_", "-")] = version
    return pins


# pinned accelerator stacks, never part of all/dev; their pins are checked against the Dockerfiles
# (tests/ops/test_docker_pins.py). The neuron line needs torch 2.9, not constraints.txt's torch.
ACCELERATOR_EXTRAS = ("neuron", "jax-cuda")


def test_constraints_pin_every_dependency_within_its_range():
    project = PYPROJECT["project"]
    extras = [e for name, e in project["optional-dependencies"].items() if name != "neuron"]
    requirements = [*project["dependencies"], *(r for extra in extras for r in extra)]
    pins = _pins()
    for text in requirements:
        req = Requirement(text)
        name = req.name.lower().replace("_", "-")
        if name == project["name"]:
            continue  # an extra naming other extras of this package
        assert name in pins, f"constraints.txt has no pin for {name}"
        assert req.specifier.contains(pins[name], prereleases=True), (text, pins[name])


def test_extras_are_layered():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(extras) == {"torch", "jax", "ui", "train", "import", "all", "dev", *ACCELERATOR_EXTRAS}
    assert extras["all"] == ["ddm-pipeline[torch,jax,ui,train]"]
    # other people's checkpoints (transformers, diffusers): an extra of their own, not in all; dev tests it
    assert {Requirement(r).name for r in extras["import"]} == {"ddm-pipeline", "transformers", "diffusers"}
    assert "ddm-pipeline[all,import]" in extras["dev"]
    base = {Requirement(r).name for r in PYPROJECT["project"]["dependencies"]}
    assert not base & {"torch", "jax", "flax", "flask", "flask-socketio", "matplotlib"}


def test_every_package_folder_is_installed():
    """A new folder with an __init__.py must be named in pyproject's packages, or installs lack it."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    for package, folder in setuptools["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            assert ".".join((package, *parts)) in listed, f"{init.parent} is not in pyproject's packages"


def test_every_file_of_the_web_page_is_package_data():
    """The page's templates, scripts (its ES modules in static/js/ too) and styles match a package-data
    pattern of ddm.webui, or an installed `ddm ui` serves a page whose imports 404."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["ddm.webui"]
    webui = REPO / "webui"
    for folder in ("templates", "static"):
        for path in (webui / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(webui)
                depth = len(relative.parts)
                shipped = any(relative.match(p) and depth == len(Path(p).parts) for p in patterns)
                assert shipped, f"webui/{relative} matches no package-data pattern of ddm.webui"
