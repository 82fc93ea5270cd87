"""One parameter layout for both frameworks.

The canonical layout is a flat dict name -> float32 numpy array with PyTorch's names and shapes
(the state_dict of workers/torch_expert/unet.py). The Flax twin uses the same module names; only
leaf names and axis orders differ:

    torch  <name>.weight  Conv2d [O, I, kh, kw]   <->  flax <name>.kernel [kh, kw, I, O]
    torch  <name>.weight  Linear [O, I]           <->  flax <name>.kernel [I, O]
    torch  <name>.weight  GroupNorm [C]           <->  flax <name>.scale  [C]
    torch  <name>.weight  Embedding [N, D]        <->  flax <name>.embedding [N, D]
    torch  <name>.bias                            <->  flax <name>.bias
"""

from __future__ import annotations

import numpy as np

from ddm.schema.errors import ConfigError, expected


def _flatten(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    flat: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) or hasattr(value, "items"):
            flat.update(_flatten(dict(value), name + "."))
        else:
            flat[name] = np.asarray(value, dtype=np.float32)
    return flat


def _unflatten(flat: dict[str, np.ndarray]) -> dict:
    tree: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def flax_to_canonical(params: dict) -> dict[str, np.ndarray]:
    """Flax params tree (without the 'params' collection key) -> canonical flat torch layout."""
    out: dict[str, np.ndarray] = {}
    for name, arr in _flatten(params).items():
        module, leaf = name.rsplit(".", 1)
        if leaf == "kernel" and arr.ndim == 4:
            out[f"{module}.weight"] = np.ascontiguousarray(arr.transpose(3, 2, 0, 1))
        elif leaf == "kernel" and arr.ndim == 2:
            out[f"{module}.weight"] = np.ascontiguousarray(arr.T)
        elif leaf in ("scale", "embedding"):
            out[f"{module}.weight"] = arr
        elif leaf == "bias":
            out[f"{module}.bias"] = arr
        else:
            raise ConfigError(expected("a Flax leaf kernel/bias/scale/embedding", name))
    return out


def canonical_to_flax(flat: dict[str, np.ndarray], like: dict) -> dict:
    """Canonical flat layout -> Flax params tree shaped like `like` (a freshly initialised tree).

    `like` tells which module is a GroupNorm (scale) or an Embed (embedding); every array's shape is
    checked against it so a checkpoint of another preset fails with a clear message.
    """
    template = _flatten(like)
    out: dict[str, np.ndarray] = {}
    for name, ref in template.items():
        module, leaf = name.rsplit(".", 1)
        src = f"{module}.{'bias' if leaf == 'bias' else 'weight'}"
        if src not in flat:
            raise ConfigError(expected(f"parameter {src!r} in the checkpoint", sorted(flat)[:5]))
        arr = np.asarray(flat[src], dtype=np.float32)
        if leaf == "kernel" and arr.ndim == 4:
            arr = arr.transpose(2, 3, 1, 0)
        elif leaf == "kernel" and arr.ndim == 2:
            arr = arr.T
        if arr.shape != ref.shape:
            raise ConfigError(
                expected(f"{name} of shape {tuple(ref.shape)} (Flax axis order)", tuple(arr.shape))
            )
        out[name] = np.ascontiguousarray(arr)
    extra = set(flat) - {
        f"{n.rsplit('.', 1)[0]}.{'bias' if n.endswith('.bias') else 'weight'}" for n in template
    }
    if extra:
        raise ConfigError(expected("no parameters beyond the Flax model's", sorted(extra)[:5]))
    return _unflatten(out)
