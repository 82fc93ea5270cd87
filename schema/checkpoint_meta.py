"""The checkpoint meta record: meta.json beside the weights of every expert, router and classifier.

One writer (`write_meta`, atomic) and one reader (`read_meta`, checked) for every checkpoint folder.
What each kind must record:

    expert      framework, config  - "kind" may be absent: expert checkpoints written before the field
                existed have none
    router      kind = "router", framework, config (RouterConfig), partition
    classifier  kind = "classifier", framework, dataset
    retrieval   kind = "retrieval", framework, dataset, encoder (the image tower of R-precision)
    autoencoder kind = "autoencoder", framework, config, card (schema/autoencoder_card.py)

Here `framework` is a string and `config` a JSON object; what they may hold is not this module's to
say. An expert's config is defined by its framework: the registry of expert frameworks
(ddm.workers.frameworks) names each framework's config class, and ddm.workers.checkpoint checks an
expert's record with it (check_expert_meta: framework known, config valid; read_meta adds the weights
file). That keeps this contract free of model code: schema imports no workers module.

Everything else a trainer records (steps, loss, wall time, partition, classes...) is kept as it came.
The folder-level checks that need the model code (weights file present, config valid) live with that
code: ddm.workers.checkpoint.read_meta for experts (built by ddm.workers.checkpoint.expert_meta),
ddm.router.learned for the router.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from ddm.schema.atomic import write_json_atomic
from ddm.schema.errors import ConfigError, expected

META_FILE = "meta.json"
META_FORMAT = 1
KINDS = ("expert", "router", "classifier", "retrieval", "autoencoder")
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "expert": ("framework", "config"),
    "router": ("framework", "config", "partition"),
    "classifier": ("framework", "dataset"),
    "retrieval": ("framework", "dataset", "encoder"),
    "autoencoder": ("framework", "config", "card"),
}


def kind_of(meta: dict) -> str:
    """The checkpoint's kind; a meta without one is an expert's (see the module docstring)."""
    return meta.get("kind", "expert")


def check_meta(meta: object, source: str = META_FILE) -> dict:
    """The meta itself when it is a valid record, else ConfigError saying what is missing."""
    if not isinstance(meta, dict):
        raise ConfigError(f"{source}: {expected('a JSON object', type(meta).__name__)}")
    if meta.get("format", META_FORMAT) != META_FORMAT:
        raise ConfigError(f"{source}: {expected(f'format {META_FORMAT}', meta.get('format'))}")
    kind = kind_of(meta)
    if kind not in KINDS:
        raise ConfigError(f"{source}: {expected(f'kind in {KINDS}', kind)}")
    missing = [field for field in REQUIRED_FIELDS[kind] if field not in meta]
    if missing:
        want = f"the {kind} fields {list(REQUIRED_FIELDS[kind])}"
        raise ConfigError(f"{source}: {expected(want, f'a meta without {missing}')}")
    # the shape every kind shares; what an expert's config holds, its framework checks (see above)
    for field, python_type, what in (("framework", str, "a string"), ("config", dict, "a JSON object")):
        if field in meta and not isinstance(meta[field], python_type):
            raise ConfigError(f"{source}: {expected(f'{field} {what}', meta[field])}")
    return meta


def write_meta(folder: str | Path, meta: dict) -> Path:
    """Check `meta` and write folder/meta.json atomically (with format 1 when the meta has none)."""
    folder = Path(folder)
    record = check_meta({"format": META_FORMAT, **meta}, str(folder / META_FILE))
    folder.mkdir(parents=True, exist_ok=True)
    return write_json_atomic(folder / META_FILE, record)


def read_meta(folder: str | Path, kind: str | None = None) -> dict:
    """folder/meta.json, checked; with `kind`, a checkpoint of another kind is refused."""
    path = Path(folder) / META_FILE
    if not path.is_file():
        what = f"a {kind} checkpoint folder" if kind else "a checkpoint folder"
        raise ConfigError(expected(f"{what} with {META_FILE} at {folder}", "no such file"))
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    check_meta(meta, str(path))
    if kind is not None and kind_of(meta) != kind:
        raise ConfigError(expected(f"{path} with kind = {kind}", kind_of(meta)))
    return meta


def utc_now() -> str:
    """The `created` stamp of a checkpoint: UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes (weights files, traced models), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
