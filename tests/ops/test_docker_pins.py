"""The images' pins agree with pyproject.toml's extras and constraints.txt (no image is built here).

Each Dockerfile under ops/docker installs this package with the extra of its accelerator stack, and may
install part of the stack first in a layer of its own, pinned explicitly. A pin written in a Dockerfile
must equal the pin of its extra and of constraints.txt wherever those pin the same package, so that
bumping one side only fails here. `check(root)` reads a checkout (the real one, or a modified copy in
tmp_path for the negative tests) and returns every disagreement, one line each.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
# The extras each image installs with the package wheel: its stack, and nothing else.
IMAGE_EXTRAS = {
    "cpu": {"torch", "jax", "ui", "import"},  # import: the torch-import target
    "cuda": {"torch"},
    "jax": {"jax-cuda"},
    "neuron": {"neuron"},
}
ACCELERATOR_EXTRAS = ("neuron", "jax-cuda")  # never part of all/dev: CI does not install them
JAX_CUDA_STACK = ("jax", "jaxlib", "flax", "optax")
NEURON_PINS = {"torch": "==2.9.*", "torch-neuronx": "==2.9.*", "neuronx-cc": "==2.*"}
OPTIONS_WITH_VALUE = {"-c", "--constraint", "-r", "--requirement", "--index-url", "-i", "--extra-index-url"}
WHEEL = re.compile(r'"\$\(echo /wheels/ddm_pipeline-\*\.whl\)(?:\[([A-Za-z0-9,_-]+)\])?"')


# ---------------------------------------------------------------- reading a checkout


def dockerfile_commands(text: str) -> str:
    """The Dockerfile without comment lines, each instruction on one line (continuations joined)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return "\n".join(lines).replace("\\\n", " ")


def pip_installs(text: str) -> list[tuple[set[str], list[Requirement]]]:
    """Every `pip install` of a Dockerfile: (the extras of the package wheel it installs, if any; the
    other requirements it names). Shell expansions like ${VAR:+--extra-index-url "$VAR"} are options."""
    installs = []
    for command in re.findall(r"pip install ([^&\n]*)", dockerfile_commands(text)):
        extras: set[str] = set()
        for match in WHEEL.finditer(command):
            extras |= set(match.group(1).split(",")) if match.group(1) else set()
        rest = re.sub(r"\$\{[^}]*\}", " ", WHEEL.sub(" ", command))
        requirements, skip = [], False
        for token in shlex.split(rest):
            if skip or token.startswith("-"):
                skip = not skip and token in OPTIONS_WITH_VALUE
                continue
            requirements.append(Requirement(token))
        installs.append((extras, requirements))
    return installs


def constraints(root: Path) -> dict[str, str]:
    pins = {}
    for line in (root / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def extras(root: Path) -> dict[str, dict[str, Requirement]]:
    """pyproject's extras: {extra: {package: Requirement}}, other extras of this package left out."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    out = {}
    for extra, lines in project["optional-dependencies"].items():
        reqs = [Requirement(line) for line in lines]
        out[extra] = {
            canonicalize_name(r.name): r for r in reqs if canonicalize_name(r.name) != project["name"]
        }
    return out


def exact_pin(req: Requirement) -> str | None:
    """'1.2.3' for `name==1.2.3`, else None (a range or a wildcard)."""
    (spec,) = req.specifier if len(req.specifier) == 1 else (None,)
    if spec is None or spec.operator != "==" or spec.version.endswith(".*"):
        return None
    return spec.version


# ---------------------------------------------------------------- the check


def check(root: Path) -> list[str]:
    """Every way the Dockerfiles, pyproject's extras and constraints.txt disagree."""
    pins, extra_reqs = constraints(root), extras(root)
    problems = check_extras(root, pins, extra_reqs)
    dockerfiles = {p.name.removesuffix(".Dockerfile"): p for p in (root / "ops/docker").glob("*.Dockerfile")}
    if set(dockerfiles) != set(IMAGE_EXTRAS):
        problems.append(f"ops/docker has {sorted(dockerfiles)}, this test knows {sorted(IMAGE_EXTRAS)}")
    for image, path in sorted(dockerfiles.items()):
        problems += check_dockerfile(image, path, pins, extra_reqs)
    problems += check_neuron_image(root)
    return problems


def check_extras(root: Path, pins: dict, extra_reqs: dict) -> list[str]:
    """The accelerator extras are pinned stacks (neuron: AWS's trace-capable line; jax-cuda: exactly
    constraints.txt's versions), and neither is in all/dev."""
    problems = []
    neuron = extra_reqs.get("neuron", {})
    for name, spec in NEURON_PINS.items():
        got = str(neuron[name].specifier) if name in neuron else None
        if got != spec:
            problems.append(f"pyproject neuron extra: {name}{got or ' missing'}, expected {name}{spec}")
    if "safetensors" not in neuron or neuron["safetensors"] != extra_reqs["torch"].get("safetensors"):
        problems.append("pyproject neuron extra: safetensors must be the torch extra's requirement")
    jax_cuda = extra_reqs.get("jax-cuda", {})
    for name in JAX_CUDA_STACK:
        got = exact_pin(jax_cuda[name]) if name in jax_cuda else None
        if got is None or got != pins.get(name):
            problems.append(
                f"pyproject jax-cuda extra: {name}=={got}, constraints.txt {name}=={pins.get(name)}"
            )
    if "jax" in jax_cuda and jax_cuda["jax"].extras != {"cuda12"}:
        problems.append(
            f"pyproject jax-cuda extra: {jax_cuda['jax']}, expected jax[cuda12] (its CUDA plugin)"
        )
    layers = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for layer in ("all", "dev"):
        for extra in ACCELERATOR_EXTRAS:
            if re.search(rf"[\[,]{re.escape(extra)}[\],]", " ".join(layers[layer])):
                problems.append(f"pyproject {layer} extra includes {extra}: CI would try to install it")
    return problems


def check_dockerfile(image: str, path: Path, pins: dict, extra_reqs: dict) -> list[str]:
    """The image installs the package with its stack's extras, every other package it names is pinned
    at its extra's and constraints.txt's version, and `pip check` runs after the install."""
    problems = []
    installs = pip_installs(path.read_text())
    named = set().union(*(e for e, _ in installs))
    if named != IMAGE_EXTRAS.get(image):
        want = sorted(IMAGE_EXTRAS.get(image, set()))
        problems.append(f"{path.name}: installs the package with extras {sorted(named)}, expected {want}")
    if named - set(extra_reqs):
        problems.append(f"{path.name}: extras {sorted(named - set(extra_reqs))} are not in pyproject.toml")
    stack = {n: r for extra in named & set(extra_reqs) for n, r in extra_reqs[extra].items()}
    for req in (r for _, reqs in installs for r in reqs):
        name, pin, where = canonicalize_name(req.name), exact_pin(req), f"{path.name}: {req}"
        if pin is None:
            problems.append(f"{where} is not pinned (name==version)")
            continue
        ours = stack.get(name)
        if ours is None:
            problems.append(f"{where}: not in its extras {sorted(named)}")
        elif exact_pin(ours) is not None and (ours.specifier, ours.extras) != (req.specifier, req.extras):
            problems.append(f"{where} differs from pyproject's {ours}")
        elif not ours.specifier.contains(pin, prereleases=True):
            problems.append(f"{where} is outside pyproject's {ours}")
        if name in pins and Version(pins[name]) != Version(pin):
            problems.append(f"{where} differs from constraints.txt's {name}=={pins[name]}")
    commands = dockerfile_commands(path.read_text())
    if image == "neuron" and "pip_check.py compare" not in commands:
        problems.append(f"{path.name}: no `pip_check.py compare` (pip check, less the base image's problems)")
    if image != "neuron" and not re.search(r"&& pip check\b", commands):
        problems.append(f"{path.name}: no `pip check` after the install")
    return problems


def check_neuron_image(root: Path) -> list[str]:
    """The Neuron image checks at build that torch_neuronx has trace, and its default base (also
    docker-compose.yml's) is of the PyTorch 2.9 line."""
    problems = []
    text = (root / "ops/docker/neuron.Dockerfile").read_text()
    if "import torch_neuronx; torch_neuronx.trace" not in dockerfile_commands(text):
        problems.append("neuron.Dockerfile: no build-time check that torch_neuronx has trace")
    base = re.search(r"^ARG NEURON_BASE_IMAGE=(\S+:(\S+))$", text, re.M)
    if not base or not base.group(2).startswith("2.9."):
        problems.append("neuron.Dockerfile: the default base is not a PyTorch 2.9 Neuron image")
    elif f"NEURON_BASE_IMAGE:-{base.group(1)}}}" not in (root / "docker-compose.yml").read_text():
        problems.append("docker-compose.yml's default NEURON_BASE_IMAGE differs from neuron.Dockerfile's")
    return problems


# ---------------------------------------------------------------- the real checkout


def test_the_checkout_agrees():
    assert check(REPO) == []


def test_the_parser_sees_every_install():
    paths = REPO.glob("ops/docker/*.Dockerfile")
    installs = {p.name.removesuffix(".Dockerfile"): pip_installs(p.read_text()) for p in paths}
    jax = installs["jax"]
    assert [e for e, _ in jax] == [set(), {"jax-cuda"}]
    assert [str(r) for r in jax[0][1]] == [
        "jax[cuda12]==0.10.2",
        "jaxlib==0.10.2",
        "flax==0.12.8",
        "optax==0.2.8",
    ]
    assert [[str(r) for r in reqs] for _, reqs in installs["cuda"]] == [["torch==2.13.0"], []]
    assert [e for e, _ in installs["neuron"]] == [{"neuron"}]


# cpu.Dockerfile's targets, one per role: the extras each installs (issue 27: only what the role imports)
CPU_TARGETS = {
    "webui": {"ui"},
    "router": set(),
    "router-learned": {"jax"},
    "expert-jax": {"jax"},
    "expert-torch": {"torch"},
    "torch-import": {"import"},  # an imported deployment's CPU stages: torch, transformers, diffusers
}
TORCH_LAYER = "torch-cpu"  # the stage that installs torch alone: the base of the targets with torch
TORCH_TARGETS = {"expert-torch", "torch-import"}


def dockerfile_stages(text: str) -> dict[str, str]:
    """{stage name: its instructions} of a multi-stage Dockerfile (FROM ... AS name)."""
    parts = re.split(r"^FROM \S+ AS (\S+)$", dockerfile_commands(text), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_each_cpu_target_installs_only_its_roles_extras():
    stages = dockerfile_stages((REPO / "ops/docker/cpu.Dockerfile").read_text())
    assert set(CPU_TARGETS) | {TORCH_LAYER} <= set(stages), sorted(stages)
    text = dockerfile_commands((REPO / "ops/docker/cpu.Dockerfile").read_text())
    parents = {stage: parent for parent, stage in re.findall(r"^FROM (\S+) AS (\S+)$", text, re.M)}
    (torch_layer,) = pip_installs(stages[TORCH_LAYER])  # torch alone, in a layer of its own
    assert torch_layer[0] == set() and {canonicalize_name(r.name) for r in torch_layer[1]} == {"torch"}
    for target, want in CPU_TARGETS.items():
        installs = pip_installs(stages[target])
        assert installs, target
        assert set().union(*(e for e, _ in installs)) == want, target
        named = {canonicalize_name(r.name) for _, reqs in installs for r in reqs}
        assert named == set(), (target, named)  # nothing outside the extras (torch: the layer above)
        assert (parents[target] == TORCH_LAYER) == (target in TORCH_TARGETS), (target, parents[target])
        assert re.search(r"&& pip check\b", stages[target]), target
        assert "USER ddm" in stages[target], target  # non-root, uid 10001 (the base stage's useradd)


def test_torch_source_is_a_build_argument():
    text = (REPO / "ops/docker/cpu.Dockerfile").read_text()
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu\n" in text  # the default, as before
    assert "ARG TORCH_FIND_LINKS=\n" in text
    commands = dockerfile_commands(text)
    assert '${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"}' in commands
    assert '${TORCH_FIND_LINKS:+--find-links "$TORCH_FIND_LINKS"}' in commands


def test_the_neuron_image_gets_no_jax():
    text = (REPO / "ops/docker/neuron.Dockerfile").read_text()
    installed = {canonicalize_name(r.name) for _, reqs in pip_installs(text) for r in reqs}
    installed |= {n for e, _ in pip_installs(text) for extra in e for n in extras(REPO)[extra]}
    assert installed == {"torch", "torch-neuronx", "neuronx-cc", "safetensors"}
    assert "https://pip.repos.neuron.amazonaws.com" in dockerfile_commands(text)


# ---------------------------------------------------------------- bumping one side only fails


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of what check() reads."""
    for name in ("pyproject.toml", "constraints.txt", "docker-compose.yml"):
        shutil.copy2(REPO / name, tmp_path / name)
    (tmp_path / "ops/docker").mkdir(parents=True)
    for path in (REPO / "ops/docker").glob("*.Dockerfile"):
        shutil.copy2(path, tmp_path / "ops/docker" / path.name)
    assert check(tmp_path) == []
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, (path.name, old)
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("file", "old", "new", "want"),
    [
        # constraints.txt alone: the jax-cuda extra and the JAX image both disagree
        (
            "constraints.txt",
            "\njax==0.10.2\n",
            "\njax==0.10.3\n",
            "jax.Dockerfile: jax[cuda12]==0.10.2 differs",
        ),
        ("constraints.txt", "\nflax==0.12.8\n", "\nflax==0.12.9\n", "pyproject jax-cuda extra: flax==0.12.8"),
        # the Dockerfile alone
        (
            "ops/docker/jax.Dockerfile",
            "optax==0.2.8",
            "optax==0.2.9",
            "optax==0.2.9 differs from pyproject's",
        ),
        (
            "ops/docker/cuda.Dockerfile",
            "torch==2.13.0",
            "torch==2.12.0",
            "differs from constraints.txt's torch",
        ),
        ("ops/docker/cpu.Dockerfile", "torch==2.13.0", "torch", "cpu.Dockerfile: torch is not pinned"),
        ("ops/docker/jax.Dockerfile", '"jax[cuda12]==0.10.2"', "jax==0.10.2", "differs from pyproject's"),
        ("ops/docker/neuron.Dockerfile", "[neuron]", "[neuron,jax]", "expected ['neuron']"),
        ("ops/docker/neuron.Dockerfile", "[neuron]", "[torch]", "expected ['neuron']"),
        ("ops/docker/cuda.Dockerfile", " && pip check \\\n", "", "cuda.Dockerfile: no `pip check`"),
        (
            "ops/docker/neuron.Dockerfile",
            "pip_check.py compare",
            "pip_check.py save",
            "no `pip_check.py compare`",
        ),
        ("ops/docker/neuron.Dockerfile", "torch_neuronx; torch_neuronx.trace", "torch_neuronx", "has trace"),
        (
            "ops/docker/neuron.Dockerfile",
            "neuronx:2.9.0-",
            "neuronx:2.13.0-",
            "not a PyTorch 2.9 Neuron image",
        ),
        # pyproject alone
        ("pyproject.toml", '"torch==2.9.*"', '"torch==2.10.*"', "neuron extra: torch==2.10.*, expected"),
        ("pyproject.toml", '"torch-neuronx==2.9.*"', '"torch-neuronx>=2.9"', "torch-neuronx>=2.9, expected"),
        ("pyproject.toml", '"optax==0.2.8"', '"optax==0.2.9"', "jax.Dockerfile: optax==0.2.8 differs"),
        ("pyproject.toml", '"jax[cuda12]==0.10.2"', '"jax==0.10.2"', "expected jax[cuda12]"),
        (
            "pyproject.toml",
            '"ddm-pipeline[torch,jax,ui,train]"',
            '"ddm-pipeline[torch,jax,ui,train,neuron]"',
            "pyproject all extra includes neuron",
        ),
    ],
)
def test_bumping_one_side_only_fails(checkout, file, old, new, want):
    edit(checkout / file, old, new)
    problems = check(checkout)
    assert any(want in p for p in problems), problems


# ---------------------------------------------------------------- pip check in the Neuron image


def _pip_check_module():
    spec = importlib.util.spec_from_file_location("pip_check", REPO / "ops/docker/pip_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pip_check_fails_only_on_what_the_install_added(tmp_path, capsys):
    pip_check = _pip_check_module()
    base_file = tmp_path / "base.txt"
    base = ["awscli 1.0 has requirement botocore==1.1, but you have botocore 1.2."]
    assert pip_check.main(["save", str(base_file)], check=lambda: base) == 0
    assert base_file.read_text() == base[0] + "\n"
    assert pip_check.main(["compare", str(base_file)], check=lambda: base) == 0  # only the base's
    assert "already in the base image" in capsys.readouterr().out
    ours = "torch-neuronx 2.9.0 has requirement numpy<2, but you have numpy 2.4.6."
    assert pip_check.main(["compare", str(base_file)], check=lambda: [*base, ours]) == 1
    captured = capsys.readouterr()
    assert f"pip check: {ours}\n" in captured.out and "broke 1 requirement" in captured.err
    assert pip_check.main(["compare", str(base_file)], check=lambda: []) == 0
    assert pip_check.main(["check"]) == 2


def test_pip_check_reads_this_environment():
    pip_check = _pip_check_module()
    problems = pip_check.pip_check_problems()  # the real `python -m pip check` of this venv
    assert isinstance(problems, list) and pip_check.CLEAN not in problems  # "all fine" is no problem
