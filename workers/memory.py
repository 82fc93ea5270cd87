"""An expert's memory: what its weights need on a device, what the device has free, the refusal at start
when they do not fit (naming the sizes), and what a running worker holds (its heartbeat's weights_bytes
and rss_bytes, which `ddm workers` shows).

Held weights: 4 bytes a parameter, 2 where a PyTorch expert serves in bf16 on the CPU or CUDA (the
module itself is cast before the weights are copied in: bf16 weights, not float32 weights under
autocast). While loading, the tensors read from the file and the model's own live side by side in host
memory, so a start needs the held bytes plus the file's size there; an accelerator then holds the
weights. Free host memory is MemAvailable, and the least room of the process's memory cgroups (v1 or v2,
ancestors included), page cache the kernel can reclaim not counted as used. A device whose free memory
cannot be read (Neuron, a JAX GPU without memory stats) is not checked: the load itself then says.
"""

from __future__ import annotations

import os
from pathlib import Path

from ddm.schema.errors import DeviceError

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


# (mount, limit file, usage file, the reclaimable page cache's key in memory.stat) per cgroup version
_CGROUP_FILES = {
    "v2": (Path("/sys/fs/cgroup"), "memory.max", "memory.current", "inactive_file"),
    "v1": (
        Path("/sys/fs/cgroup/memory"),
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "total_inactive_file",
    ),
}


def _room_in(folder: Path, version: str) -> int | None:
    """One cgroup folder's limit less its use, page cache the kernel can reclaim not counted as used
    (as kubelet and `docker stats` count it: reading a weights file fills the cache); None without a
    limit there."""
    _, limit_file, usage_file, inactive_key = _CGROUP_FILES[version]
    try:
        limit = (folder / limit_file).read_text().strip()
        if limit == "max" or int(limit) >= 1 << 60:  # v1 writes "no limit" as a huge number
            return None
        used = int((folder / usage_file).read_text())
        stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines() if " " in line)
        return int(limit) - (used - int(stat.get(inactive_key, 0)))
    except (OSError, ValueError):
        return None


def _cgroup_room() -> int | None:
    """The least room of this process's memory cgroup and its ancestors (cgroup v2, or v1's memory
    controller), None without any limit. A container whose /sys/fs/cgroup is its own cgroup's root (its
    /proc/self/cgroup path does not exist below the mount) reads the mount's own files."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        version = "v2" if controllers == "" else "v1" if "memory" in controllers.split(",") else None
        if version is None:
            continue
        mount = _CGROUP_FILES[version][0]
        folder = mount / path.strip("/")
        if not folder.is_dir():
            folder = mount
        while True:  # the limit may sit on an ancestor (a pod's, a systemd slice's)
            rooms.append(_room_in(folder, version))
            if folder == mount:
                break
            folder = folder.parent
    found = [room for room in rooms if room is not None]
    return min(found) if found else None


def available_bytes(device: str) -> int | None:
    """Free memory where `device` keeps an expert's weights, in bytes; None when it cannot be read."""
    if device in ("cpu", "cpu-traced"):
        found = [b for b in (_meminfo_available(), _cgroup_room()) if b is not None]
        return min(found) if found else None
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info()[0])
    return None


def check_fits(what: str, held: int, loading: int, free: int | None, where: str, precision: str) -> None:
    """DeviceError naming the sizes when `loading` bytes (the peak while loading) exceed `free` at
    `where`; nothing when they fit or `free` is unknown. held: what the weights take once loaded."""
    if free is None or loading <= free:
        return
    hint = ' or serve it in bf16 (precision = "bf16": 2 bytes a parameter)' if precision != "bf16" else ""
    raise DeviceError(
        f"{what} does not fit on {where}: its weights take {held / GB:.2f} GB in {precision} and about "
        f"{loading / GB:.2f} GB while loading (the file's tensors beside the model's), but "
        f"{free / GB:.2f} GB is free there; give it a device with more memory{hint}"
    )


def check_load(
    what: str,
    weights: Path,
    bytes_per_value: int,
    device: str,
    precision: str,
    device_free: int | None = None,
) -> None:
    """Refuse (DeviceError) an expert whose weights cannot be loaded: the load happens in host memory
    (the file's tensors beside the model's, `held_bytes` + the file's size), and an accelerator then holds
    the weights (device_free: its free bytes, where the caller can read them; CUDA's are read here)."""
    held = held_bytes(weights, bytes_per_value)
    on_host = device in ("cpu", "cpu-traced")
    host = "cpu" if on_host else "the host (while loading)"
    check_fits(what, held, held + weights.stat().st_size, available_bytes("cpu"), host, precision)
    if not on_host:
        free = available_bytes(device) if device_free is None else device_free
        check_fits(what, held, held, free, device, precision)


def resident_bytes() -> int | None:
    """This process's resident set size (Linux), None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
