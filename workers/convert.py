"""Convert an expert checkpoint to another framework (same weights, same meta, new framework): the
source's record reads its weights into the canonical layout (ddm.workers.layout, through the
architecture's hooks), the target's writes them (ddm.workers.frameworks, ddm.workers.architectures)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddm.schema.checkpoint_meta import file_sha256, write_meta
from ddm.schema.errors import ConfigError
from ddm.schema.expert_card import stamp_card
from ddm.workers.checkpoint import WEIGHTS_FIELD, architecture_of, config_of, read_meta
from ddm.workers.frameworks import expert_framework


def convert(src: str | Path, to: str, out: str | Path) -> dict:
    """Write a `to`-framework copy of checkpoint `src` into folder `out`; returns the new meta.

    Only inference weights travel (the EMA weights); the train state stays framework-specific.
    """
    src, out = Path(src), Path(out)
    target = expert_framework(to, "--to")
    meta = read_meta(src)
    if WEIGHTS_FIELD in meta:  # load_canonical reads the framework's file beside meta.json
        raise ConfigError(
            f"{src} serves its weights in place ({meta[WEIGHTS_FIELD]}); convert reads only weights "
            "beside meta.json"
        )
    if src.resolve() == out.resolve():
        raise ConfigError("--out must differ from the source checkpoint folder")
    architecture = architecture_of(meta)
    architecture.code(to)  # the architecture is written in the target framework
    canonical = expert_framework(meta["framework"]).load_canonical(src, architecture)
    out.mkdir(parents=True, exist_ok=True)
    target.save_canonical(out, canonical, config_of(meta))
    new_meta = {**meta, "framework": to, "converted_from": {"framework": meta["framework"], "path": str(src)}}
    # the card follows: its framework, and the digest of the weights just written
    new_meta = stamp_card(new_meta, file_sha256(out / target.weights_file))
    write_meta(out, new_meta)
    if (src / "loss.csv").is_file():
        shutil.copyfile(src / "loss.csv", out / "loss.csv")
    return new_meta
