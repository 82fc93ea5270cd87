"""Convert an expert checkpoint between PyTorch and JAX (same weights, same meta, new framework)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError, expected
from ddm.workers.checkpoint import FRAMEWORKS, config_of, read_meta


def load_canonical(folder: Path, framework: str) -> dict:
    if framework == "torch":
        from ddm.workers.torch_expert.checkpoint import load_weights
    else:
        from ddm.workers.jax_expert.checkpoint import load_weights
    return load_weights(folder)


def convert(src: str | Path, to: str, out: str | Path) -> dict:
    """Write a `to`-framework copy of checkpoint `src` into folder `out`; returns the new meta.

    Only inference weights travel (the EMA weights); the train state stays framework-specific.
    """
    src, out = Path(src), Path(out)
    if to not in FRAMEWORKS:
        raise ConfigError(expected(f"--to in {FRAMEWORKS}", to))
    meta = read_meta(src)
    if src.resolve() == out.resolve():
        raise ConfigError("--out must differ from the source checkpoint folder")
    canonical = load_canonical(src, meta["framework"])
    out.mkdir(parents=True, exist_ok=True)
    if to == "torch":
        from ddm.workers.torch_expert.checkpoint import save_weights

        save_weights(out, canonical)
    else:
        from ddm.workers.jax_expert.checkpoint import save_weights
        from ddm.workers.jax_expert.unet import UNet, init_params

        save_weights(out, canonical, init_params(UNet(config_of(meta)), 0))
    new_meta = {**meta, "framework": to, "converted_from": {"framework": meta["framework"], "path": str(src)}}
    write_meta(out, new_meta)
    if (src / "loss.csv").is_file():
        shutil.copyfile(src / "loss.csv", out / "loss.csv")
    return new_meta
