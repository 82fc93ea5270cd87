"""Convert an expert checkpoint to another framework (same weights, same meta, new framework): the
source's record reads its weights into the canonical layout (ddm.workers.layout), the target's writes
them (ddm.workers.frameworks)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError
from ddm.workers.checkpoint import config_of, read_meta
from ddm.workers.frameworks import expert_framework


def convert(src: str | Path, to: str, out: str | Path) -> dict:
    """Write a `to`-framework copy of checkpoint `src` into folder `out`; returns the new meta.

    Only inference weights travel (the EMA weights); the train state stays framework-specific.
    """
    src, out = Path(src), Path(out)
    target = expert_framework(to, "--to")
    meta = read_meta(src)
    if src.resolve() == out.resolve():
        raise ConfigError("--out must differ from the source checkpoint folder")
    canonical = expert_framework(meta["framework"]).load_canonical(src)
    out.mkdir(parents=True, exist_ok=True)
    target.save_canonical(out, canonical, config_of(meta))
    new_meta = {**meta, "framework": to, "converted_from": {"framework": meta["framework"], "path": str(src)}}
    write_meta(out, new_meta)
    if (src / "loss.csv").is_file():
        shutil.copyfile(src / "loss.csv", out / "loss.csv")
    return new_meta
