"""An expert's memory: what its weights need on a device, what the device has free, the refusal at start
when they do not fit (naming the sizes), and what a running worker holds (its heartbeat's weights_bytes
and rss_bytes, which `ddm workers` shows).

Held weights: 4 bytes a parameter, 2 where a PyTorch expert serves in bf16 on the CPU or CUDA (the
module itself is cast: bf16 weights, not float32 weights under autocast). While loading, the tensors read
from the file and the model's own live side by side, so a start needs about LOAD_FACTOR times the held
weights. A device whose free memory cannot be read (Neuron, a JAX GPU without memory stats) is not
checked: the load itself then says.
"""

from __future__ import annotations

import os
from pathlib import Path

from ddm.schema.errors import DeviceError

LOAD_FACTOR = 2.0
GB = 1e9


def parameter_count(weights: Path) -> int | None:
    """Values in a safetensors file, from its header alone (None: another format)."""
    if weights.suffix != ".safetensors":
        return None
    from safetensors import safe_open

    count = 0
    with safe_open(str(weights), framework="numpy") as f:
        for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
            n = 1
            for k in f.get_slice(name).get_shape():
                n *= k
            count += n
    return count


def held_bytes(weights: Path, bytes_per_value: int) -> int:
    """What the weights of `weights` take once loaded: their values times bytes_per_value (a file of
    another format, model.msgpack's float32: its size)."""
    count = parameter_count(weights)
    return weights.stat().st_size if count is None else count * bytes_per_value


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _cgroup_room() -> int | None:
    """This process's memory cgroup limit less its use (cgroup v2, or v1's memory controller), None
    without a limit or where the cgroup's files cannot be read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: limit and use in memory.max / memory.current
            files = (Path("/sys/fs/cgroup") / path.lstrip("/"), "memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            files = (
                Path("/sys/fs/cgroup/memory") / path.lstrip("/"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        else:
            continue
        folder, limit_file, usage_file = files
        try:
            limit = (folder / limit_file).read_text().strip()
            if limit != "max" and int(limit) < 1 << 60:  # v1 writes "no limit" as a huge number
                return int(limit) - int((folder / usage_file).read_text())
        except (OSError, ValueError):
            continue
    return None


def available_bytes(device: str) -> int | None:
    """Free memory where `device` keeps an expert's weights, in bytes; None when it cannot be read."""
    if device in ("cpu", "cpu-traced"):
        found = [b for b in (_meminfo_available(), _cgroup_room()) if b is not None]
        return min(found) if found else None
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info()[0])
    return None


def check_fits(what: str, need: int, free: int | None, device: str, precision: str) -> None:
    """DeviceError naming the sizes when `need` held bytes (times LOAD_FACTOR while loading) exceed
    `free` on `device`; nothing when they fit or `free` is unknown."""
    if free is None or need * LOAD_FACTOR <= free:
        return
    hint = ' or serve it in bf16 (precision = "bf16": 2 bytes a parameter)' if precision != "bf16" else ""
    raise DeviceError(
        f"{what} does not fit on {device}: its weights take {need / GB:.2f} GB in {precision} and about "
        f"{need * LOAD_FACTOR / GB:.2f} GB while loading, but {free / GB:.2f} GB is free there; give it a "
        f"device with more memory{hint}"
    )


def resident_bytes() -> int | None:
    """This process's resident set size (Linux), None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
