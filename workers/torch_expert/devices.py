"""Where a PyTorch expert runs: device names, the checks that fail at once with what to do, and the
versions of the stack that a log line, a heartbeat and the traced-model cache key record.

The pinned stacks and driver floors per accelerator are in docs/DEPLOY.md; the install extras that
carry the same pins are in pyproject.toml (`neuron`, `torch`).
"""

from __future__ import annotations

import shutil
import subprocess
from importlib.metadata import PackageNotFoundError, version

import torch

from ddm.schema.errors import ConfigError, DeviceError
from ddm.schema.precision import check_precision

DEVICES = ("auto", "cpu", "cuda", "neuron", "cpu-traced")
# The precisions each device can honour. cpu-traced stands in for Neuron's compile-and-load path on any
# CPU, in float32 only; tf32 exists only where the hardware has it (CUDA: checked per GPU below).
PRECISIONS_ON = {
    "cpu": ("fp32", "bf16"),
    "cpu-traced": ("fp32",),
    "cuda": ("fp32", "tf32", "bf16"),
    "neuron": ("fp32", "tf32", "bf16"),
}
# AWS's trace-capable line: torch-neuronx 2.9 (XLA-based, in maintenance). Since Neuron SDK 2.33 the
# package of that name is a native backend without `trace`; pyproject's `neuron` extra has these pins.
NEURON_PINS = '"torch==2.9.*" "torch-neuronx==2.9.*" "neuronx-cc==2.*"'
NEURON_INSTALL_HINT = (
    "torch-neuronx is not importable. It is not on PyPI: on a Trainium (trn1/trn2) or Inferentia2 host "
    "install the trace-capable line from AWS's Neuron package index: `pip install --extra-index-url "
    f"https://pip.repos.neuron.amazonaws.com {NEURON_PINS}` (or use ops/docker/neuron.Dockerfile; "
    "docs/DEPLOY.md, AWS Trainium)"
)
CUDA_DRIVER_HINT = (
    "torch {torch} is a CUDA {cuda} build; it needs an NVIDIA driver that supports CUDA {cuda} (CUDA 13.0: "
    "driver 580.65.06 or later, and a Turing or newer GPU). `nvidia-smi` shows the driver: {driver}. "
    "docs/DEPLOY.md, NVIDIA GPU with PyTorch, has the floors and the CUDA 12 option"
)


def import_torch_neuronx():
    """Import torch_neuronx and check it is the line with `trace`; fail at once with how to install it."""
    try:
        import torch_neuronx  # noqa: PLC0415 - optional, Trainium hosts only
    except ImportError as exc:
        raise DeviceError(NEURON_INSTALL_HINT) from exc
    if not callable(getattr(torch_neuronx, "trace", None)):
        raise DeviceError(
            f"torch-neuronx {package_version('torch-neuronx')} has no trace(): since Neuron SDK 2.33 that "
            "package name is the native backend, and the tracing API this expert compiles its buckets "
            f"with lives in the 2.9 line. Install {NEURON_PINS} from https://pip.repos.neuron.amazonaws.com"
        )
    return torch_neuronx


def resolve_device(device: str) -> str:
    if device not in DEVICES:
        raise ConfigError(f"expected a torch device in {DEVICES}, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        if torch.version.cuda is None:
            raise DeviceError(f"--device cuda, but torch {torch.__version__} is a CPU-only build")
        raise DeviceError(
            "expected a CUDA GPU for --device cuda, but torch.cuda.is_available() is False. "
            + CUDA_DRIVER_HINT.format(
                torch=torch.__version__, cuda=torch.version.cuda, driver=nvidia_driver()
            )
        )
    if device == "neuron":
        import_torch_neuronx()
    return device


def check_device_precision(device: str, precision: str) -> str:
    """precision if `device` (resolved) can honour it, else a ConfigError naming the choices (input that
    does not fit, as against DeviceError: a device this host cannot use)."""
    check_precision(precision)
    if precision not in PRECISIONS_ON[device]:
        raise ConfigError(
            f"precision {precision} is not available on {device}; expected one of {PRECISIONS_ON[device]}"
        )
    if device == "cuda" and precision != "fp32" and torch.cuda.get_device_capability() < (8, 0):
        # TF32 and native bf16 arrive with Ampere; before it the flags are silently ignored
        capability = ".".join(map(str, torch.cuda.get_device_capability()))
        raise ConfigError(
            f"precision {precision} needs an Ampere or newer GPU (compute capability 8.0+); "
            f"{torch.cuda.get_device_name()} is {capability}: use fp32"
        )
    return precision


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def nvidia_driver() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None where there is none."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def toolchain(device: str) -> dict[str, str | None]:
    """The versions that decide what a compile produces, and what a start-up log line shows."""
    versions: dict[str, str | None] = {"torch": torch.__version__}
    if device == "cuda":
        versions["cuda"] = torch.version.cuda
        versions["cudnn"] = str(torch.backends.cudnn.version())
        versions["driver"] = nvidia_driver()
        versions["gpu"] = torch.cuda.get_device_name()
        versions["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    elif device == "neuron":
        for package in ("torch-neuronx", "neuronx-cc", "libneuronxla"):
            versions[package] = package_version(package)
    return versions


def toolchain_line(device: str) -> str:
    """The toolchain as the expert worker's start-up line shows it: "torch 2.x, cuda 12.x, ..."."""
    return ", ".join(f"{k} {v}" for k, v in toolchain(device).items())
