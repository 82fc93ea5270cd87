"""The deployment descriptor: what the serving router says a job means.

The router publishes it to Redis (Names.deployment, JSON) when it starts and with every heartbeat, so
it expires by itself when no router serves. Clients and the web UI validate against it and show it;
none of them needs the deployment file. A job that leaves strategy or guidance unset gets this
descriptor's defaults (resolve), and the router records the values it used in the job hash.

    {"name", "protocol_version", "router_kind", "experts": [{"id", "framework", "device", "labels",
     "cluster", "label_counts" (optional)}], "strategies", "default_strategy", "default_guidance",
     "default_on_expert_loss", "class_names", "router_id", "published_at", "sampling" (optional:
     {"solvers", "grids", "default_solver", "default_grid"}; absent: Euler on the uniform grid only),
     "sample_space" (optional: {"shape", "value_range", "num_classes", "class_names"}, schema/
     sample_space.py; absent: the legacy 1x32x32 in [-1, 1] with 10 classes named by class_names)}

"example_prompts" (optional, a text deployment's): prompts its owner suggests; the web UI offers them.
"decoder" (optional, a latent deployment's): {"encoder_id", "pixel_space", "preview"} (schema/
autoencoder_card.py DecoderInfo): the router asks the decoder queue for a finished job's pixels; the
web UI draws every step's latents through the linear preview.

Each expert may carry "card" (optional): {"framework", "architecture", "objective", "schedule",
"time_convention"}, a summary of its checkpoint's card (schema/expert_card.py); absent: unknown.
class_names always equals sample_space's class names (kept for readers before sample spaces).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from .autoencoder_card import DecoderInfo
from .conditioning import Conditioning, check_prompt
from .errors import SchemaError, expected
from .flow import NULL_CLASS
from .messages import (
    DEFAULT_EXPERT_LOSS_POLICY,
    EXPERT_LOSS_POLICIES,
    MAX_GUIDANCE,
    PROTOCOL_VERSION,
    JobSpec,
)
from .names import check_worker_id
from .resolved import ResolvedJob
from .sample_space import LEGACY, SampleSpace
from .solver import LEGACY_OFFER, SamplingOffer
from .strategy import Strategy

DIGITS = LEGACY.class_names  # class names when a legacy deployment names none
UNCONDITIONAL = "unconditional"  # how the null label (NULL_CLASS) is shown wherever a label is
# What a job with unconditional images gets when it names no strategy and the deployment's default is
# the oracle (which reads the label): the router's top expert, the oracle's nearest router strategy.
UNCONDITIONAL_DEFAULT_STRATEGY = "top1"


def label_name(y: int | None, class_names: tuple[str, ...] | list[str] = DIGITS) -> str:
    """A job label as people read it: its class name, or 'unconditional' for null (and for the null
    class K, the number of classes, what a resolved job and a job hash from before null carry)."""
    return UNCONDITIONAL if y is None or y == len(class_names) else class_names[y]


def labels_summary(labels, class_names: tuple[str, ...] | list[str] = DIGITS) -> str:
    """Labels per image, in order, as one line: '3,8,3,8', '3,unconditional,unconditional'."""
    return ",".join(label_name(y, class_names) for y in labels)


def oracle_null_error(
    strategy: str,
    nulls: int,
    accepted: tuple[str, ...] = (),
    router_kind: str | None = None,
    null_class: int = NULL_CLASS,
) -> str:
    """Why a job with `nulls` unconditional images cannot run under `strategy` 'oracle', and what would:
    the strategies the deployment accepts that read x_t (`accepted`: its descriptor's list; the syntax
    where unknown), or, behind a label-table router (`router_kind` not 'learned'), another deployment."""
    why = (
        f"strategy {strategy!r} routes each image by its label, and {nulls} image(s) carry the null label "
        f"{null_class} ({UNCONDITIONAL}), which names no expert"
    )
    if router_kind is not None and router_kind != "learned":
        return (
            f"{why}; and this deployment's router (kind {router_kind!r}) routes by label only: unconditional "
            "images need a deployment whose router reads x_t (router kind 'learned'; `ddm sample` takes "
            "--deployment, `ddm submit` goes to the deployment being served)"
        )
    readers = [s for s in accepted if Strategy.parse(s).kind != "oracle"]
    named = ", ".join(readers[:-1]) + f" or {readers[-1]}" if len(readers) > 1 else "".join(readers)
    return (
        f"{why}: use a strategy of the router, which reads x_t ("
        + (f"this deployment accepts {named}" if readers else "top1, topk:K with K >= 2, or full")
        + "), or leave the strategy unset"
    )


MAX_EXAMPLE_PROMPTS = 8  # a handful to click, not a data set


def check_example_prompts(prompts: object, conditioning: Conditioning) -> tuple[str, ...]:
    """A list of at most MAX_EXAMPLE_PROMPTS prompts with words (check_prompt's rules), and none unless the
    deployment is conditioned on prompts; SchemaError saying which rule a value broke."""
    if not isinstance(prompts, list | tuple) or len(prompts) > MAX_EXAMPLE_PROMPTS:
        raise SchemaError(expected(f"example_prompts, a list of 0..{MAX_EXAMPLE_PROMPTS} prompts", prompts))
    if prompts and conditioning.kind != "text":
        what = f"no example_prompts: the deployment is conditioned on {conditioning.describe()}, not prompts"
        raise SchemaError(expected(what, list(prompts)))
    for i, prompt in enumerate(prompts):
        if not check_prompt(f"example_prompts[{i}]", prompt).strip():
            raise SchemaError(expected(f"example_prompts[{i}], a prompt with words", prompt))
    return tuple(prompts)


# An expert's card as the descriptor summarises it (schema/expert_card.py): what the UI shows.
CARD_SUMMARY_FIELDS = ("framework", "architecture", "objective", "schedule", "time_convention")


def check_card_summary(card: object) -> dict[str, Any]:
    """A card summary, checked: exactly CARD_SUMMARY_FIELDS, strings but `schedule` (null, or a JSON
    object {"name", parameters...}). SchemaError otherwise."""
    want = f"expert card with keys {list(CARD_SUMMARY_FIELDS)}"
    if not isinstance(card, dict) or set(card) != set(CARD_SUMMARY_FIELDS):
        raise SchemaError(expected(want, sorted(card, key=str) if isinstance(card, dict) else card))
    for key in CARD_SUMMARY_FIELDS:
        value = card[key]
        ok = (value is None or isinstance(value, dict)) if key == "schedule" else isinstance(value, str)
        if not ok:
            raise SchemaError(
                expected(f"expert card {key} as a string" + (" or null" * (key == "schedule")), value)
            )
    return dict(card)


@dataclass(frozen=True)
class ExpertInfo:
    """One expert as the router deploys it: framework, configured device, the labels it was trained on,
    how its cluster was made (the partition method, e.g. 'labels' or 'kmeans') and its training images
    per label 0..K-1 (empty where the router predates them): a k-means cluster holds most labels, so
    only the counts say what it is mostly made of. `card`: its card's summary (CARD_SUMMARY_FIELDS),
    None where unknown (a router before cards). Label ranges are checked by the descriptor, which
    knows the sample space."""

    id: int
    framework: str
    device: str
    labels: tuple[int, ...]
    cluster: str
    label_counts: tuple[int, ...] = ()
    card: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        counts = self.label_counts
        if not all(type(y) is int and y >= 0 for y in self.labels):
            raise SchemaError(expected("expert labels as non-negative ints", self.labels))
        if not all(type(c) is int and c >= 0 for c in counts):
            raise SchemaError(expected("expert label_counts as non-negative ints", counts))
        if counts and tuple(y for y, c in enumerate(counts) if c > 0) != tuple(sorted(self.labels)):
            want = f"label_counts non-zero exactly at labels {list(self.labels)}"
            raise SchemaError(expected(want, counts))
        if self.card is not None:
            check_card_summary(self.card)

    def check_space(self, space: SampleSpace) -> None:
        """Its labels and label counts sized by `space`'s classes (SchemaError otherwise)."""
        k = space.num_classes
        if not all(0 <= y < k for y in self.labels):
            raise SchemaError(expected(f"expert {self.id} labels in 0..{k - 1}", list(self.labels)))
        if self.label_counts and len(self.label_counts) != k:
            raise SchemaError(expected(f"expert {self.id} label_counts, {k} counts", list(self.label_counts)))

    @classmethod
    def from_dict(cls, d: object) -> ExpertInfo:
        d = _exact_keys("expert", d, cls, optional=("label_counts", "card"))
        labels = d["labels"]
        if not isinstance(labels, list) or not all(type(y) is int and y >= 0 for y in labels):
            raise SchemaError(expected("expert labels as a list of non-negative ints", labels))
        if type(d["id"]) is not int or not all(
            isinstance(d[k], str) for k in ("framework", "device", "cluster")
        ):
            raise SchemaError(expected("expert id int and framework, device, cluster strings", d))
        counts = d.get("label_counts", [])
        if not isinstance(counts, list):
            raise SchemaError(expected("expert label_counts as a list of non-negative ints", counts))
        card = d.get("card")
        return cls(d["id"], d["framework"], d["device"], tuple(labels), d["cluster"], tuple(counts), card)

    def to_dict(self) -> dict[str, Any]:
        d = {**dataclasses.asdict(self), "labels": list(self.labels), "label_counts": list(self.label_counts)}
        if not self.label_counts:
            del d["label_counts"]  # what a router before label_counts wrote
        if self.card is None:
            del d["card"]  # what a router before cards wrote
        return d


@dataclass(frozen=True)
class DeploymentDescriptor:
    name: str
    router_kind: str
    experts: tuple[ExpertInfo, ...]
    strategies: tuple[str, ...]  # canonical spellings, every one the router accepts
    default_strategy: str
    default_guidance: float
    class_names: tuple[str, ...]  # one per label 0..K-1: sample_space.class_names, for old readers
    router_id: str
    published_at: float
    default_on_expert_loss: str = DEFAULT_EXPERT_LOSS_POLICY  # what a job that names none gets
    protocol_version: int = PROTOCOL_VERSION
    sampling: SamplingOffer = LEGACY_OFFER  # the solvers and grids it serves, and their defaults
    # What one sample is. None (a descriptor before sample spaces, or built without one): the legacy
    # space named by class_names, filled in here, so it is never None once built.
    sample_space: SampleSpace | None = None
    decoder: DecoderInfo | None = None  # a latent deployment's decoder; None: the samples are pixels
    # What a job conditions on (schema/conditioning.py). None: the sample space's default (class labels,
    # or none in an unconditional space), filled in here; written only when it is text, so a reader
    # from before the field reads every class deployment's descriptor as before.
    conditioning: Conditioning | None = None
    example_prompts: tuple[str, ...] = ()  # a text deployment's, to click in the web UI

    def __post_init__(self) -> None:
        if self.sample_space is None:
            names = self.class_names
            if not isinstance(names, tuple | list) or len(names) != LEGACY.num_classes:
                raise SchemaError(expected(f"{LEGACY.num_classes} class names (no sample_space)", names))
            try:
                space = SampleSpace(LEGACY.shape, LEGACY.value_range, LEGACY.num_classes, tuple(names))
            except SchemaError as exc:
                raise SchemaError(f"descriptor class_names: {exc}") from None
            object.__setattr__(self, "sample_space", space)
        if not isinstance(self.sample_space, SampleSpace):
            raise SchemaError(expected("descriptor sample_space a SampleSpace", self.sample_space))
        if self.conditioning is None:
            object.__setattr__(self, "conditioning", Conditioning.of(self.sample_space))
        self.conditioning.check_space(self.sample_space)
        examples = check_example_prompts(self.example_prompts, self.conditioning)
        object.__setattr__(self, "example_prompts", examples)
        if self.protocol_version != PROTOCOL_VERSION:
            raise SchemaError(
                expected(f"descriptor protocol_version {PROTOCOL_VERSION}", self.protocol_version)
            )
        if [e.id for e in self.experts] != list(range(len(self.experts))) or not self.experts:
            raise SchemaError(expected("experts with ids 0..K-1 in order", [e.id for e in self.experts]))
        for s in self.strategies:
            if str(Strategy.parse(s)) != s:
                raise SchemaError(expected("strategies in canonical spelling", s))
        if self.default_strategy not in self.strategies:
            raise SchemaError(expected(f"default_strategy in {list(self.strategies)}", self.default_strategy))
        g = self.default_guidance
        if not isinstance(g, int | float) or not math.isfinite(g) or not 0.0 <= g <= MAX_GUIDANCE:
            raise SchemaError(expected(f"default_guidance in [0, {MAX_GUIDANCE:g}]", g))
        if tuple(self.class_names) != self.sample_space.class_names:
            raise SchemaError(
                expected(
                    f"class_names equal to sample_space's {list(self.sample_space.class_names)}",
                    self.class_names,
                )
            )
        for e in self.experts:
            e.check_space(self.sample_space)
        if self.decoder is not None and self.decoder.preview.channels != self.sample_space.shape[0]:
            raise SchemaError(
                expected(
                    f"a decoder preview reading {self.sample_space.shape[0]} channels",
                    self.decoder.preview.channels,
                )
            )
        check_worker_id(self.router_id)
        if self.default_on_expert_loss not in EXPERT_LOSS_POLICIES:
            raise SchemaError(
                expected(
                    f"default_on_expert_loss in {list(EXPERT_LOSS_POLICIES)}", self.default_on_expert_loss
                )
            )

    @property
    def image_space(self) -> SampleSpace:
        """What a finished job's images are: the decoder's pixels (shape and range) on a latent
        deployment, with this deployment's classes; else the sample space itself."""
        if self.decoder is None:
            return self.sample_space
        pixels, ours = self.decoder.pixel_space, self.sample_space
        return SampleSpace(pixels.shape, pixels.value_range, ours.num_classes, ours.class_names)

    @property
    def labels(self) -> tuple[int, ...]:
        """Every label some expert was trained on, ascending."""
        return tuple(sorted({y for e in self.experts for y in e.labels}))

    @property
    def null_class(self) -> int:
        """The null label (unconditional): the sample space's number of classes."""
        return self.sample_space.null_class

    def nulls(self, spec: JobSpec) -> int:  # unconditional images: null, or this space's K inside
        return spec.nulls(self.sample_space)

    def label_name(self, y: int | None) -> str:
        """A job label by this deployment's class names ('unconditional' for the null label)."""
        return label_name(y, self.class_names)

    def check(self, spec: JobSpec) -> None:
        """Refuse a job this deployment cannot serve (SchemaError naming the deployment): a strategy it
        does not route, a label no expert was trained on, or an unconditional image (the null label)
        under 'oracle', the strategy a job left unset included. Unset defaults are otherwise servable."""
        where = f"deployment {self.name!r} (served by {self.router_id})"
        self._check_conditioning(spec, where)
        spec.check_space(self.sample_space)  # 0..K-1 or null: K as a number is refused
        if spec.strategy is not None and str(Strategy.parse(spec.strategy)) not in self.strategies:
            raise SchemaError(f"{where}: " + expected(f"strategy in {list(self.strategies)}", spec.strategy))
        try:
            self.sampling.check(spec.solver, spec.grid)
        except SchemaError as exc:
            raise SchemaError(f"{where}: {exc}") from None
        unknown = sorted(set(spec.labels) - set(self.labels) - {None})
        if unknown:
            raise SchemaError(
                f"{where}: " + expected(f"labels some expert was trained on {list(self.labels)}", unknown)
            )
        self._check_oracle(spec, where)

    def _check_conditioning(self, spec: JobSpec, where: str) -> None:
        """A prompt only where the deployment reads prompts; labels only where it has classes."""
        if spec.prompt is not None and self.conditioning.kind != "text":
            raise SchemaError(
                f"{where} is conditioned on {self.conditioning.describe()}, not prompts: "
                + expected("no prompt (name classes with labels instead)", spec.prompt[:60])
            )
        if self.conditioning.kind == "text" and set(spec.labels) - {None}:
            raise SchemaError(
                f"{where} is conditioned on {self.conditioning.describe()}, not class labels: "
                + expected("a prompt, and no labels", sorted(set(spec.labels) - {None}))
            )

    def _check_oracle(self, spec: JobSpec, where: str) -> None:
        strategy = self.resolve(spec).strategy
        if self.nulls(spec) and strategy.kind == "oracle":
            said = oracle_null_error(
                str(strategy), self.nulls(spec), self.strategies, self.router_kind, self.null_class
            )
            raise SchemaError(f"{where}: {said}")
        prompt_mix = self.conditioning.kind == "text" and strategy.mixes
        if self.nulls(spec) and self.router_kind != "learned" and len(self.experts) > 1 and not prompt_mix:
            # a table router's null row is a fixed choice: every unconditional image would go to one
            # expert whatever x_t shows, which is not what "unconditional" promises. A text job mixing
            # its experts by their data share (full, top-k) is the prompt-blind baseline: allowed
            raise SchemaError(
                f"{where}: unconditional images need a router that reads x_t (router kind 'learned'); "
                f"this deployment's router is {self.router_kind!r}, which routes by label only"
            )

    def experts_needed(self, spec: JobSpec) -> tuple[tuple[int, ...], bool]:
        """(experts, every_one) a job may need: under oracle, the experts of its labels, every one of
        them (an unconditional image names none: SchemaError, as check says); under top1, any expert may
        be picked at any step, so every one; a mixing strategy that may degrade routes around an expert
        with no live worker (docs/ARCHITECTURE.md), so any one live expert will do; one that waits needs
        every one. Unconditional images change nothing for the router strategies: they read x_t."""
        resolved = self.resolve(spec)
        if resolved.strategy.kind == "oracle":
            self._check_oracle(spec, f"deployment {self.name!r} (served by {self.router_id})")
            wanted = set(spec.labels)
            return tuple(e.id for e in self.experts if wanted & set(e.labels)), True
        return tuple(e.id for e in self.experts), not resolved.routes_around

    def unserved(self, spec: JobSpec, live: set[int]) -> list[int]:
        """The experts this job needs that are not in `live` (none at all, when any one will do)."""
        experts, every_one = self.experts_needed(spec)
        down = [k for k in experts if k not in live]
        return down if every_one or len(down) == len(experts) else []

    def default_strategy_for(self, spec: JobSpec) -> str:
        """The strategy a job that names none gets: the deployment's default, except that a job with
        unconditional images gets top1 where that default is the oracle (which reads the label, and a
        null label names no expert): the router reads x_t for those rows."""
        default = self.default_strategy
        if self.nulls(spec) and Strategy.parse(default).kind == "oracle":
            return UNCONDITIONAL_DEFAULT_STRATEGY
        return default

    def resolve(self, spec: JobSpec) -> ResolvedJob:
        """`spec` with an unset strategy, guidance or on_expert_loss filled in from this deployment's
        defaults (default_strategy_for: the strategy), typed: what runs."""
        return ResolvedJob.of(
            dataclasses.replace(
                spec,
                strategy=self.default_strategy_for(spec) if spec.strategy is None else spec.strategy,
                guidance=self.default_guidance if spec.guidance is None else spec.guidance,
                on_expert_loss=spec.on_expert_loss or self.default_on_expert_loss,
                solver=spec.solver or self.sampling.default_solver,
                grid=spec.grid or self.sampling.default_grid,
            ),
            self.sample_space,
            self.conditioning.text,
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["experts"] = [e.to_dict() for e in self.experts]
        d["strategies"], d["class_names"] = list(self.strategies), list(self.class_names)
        d["sampling"] = self.sampling.to_dict()
        d["sample_space"] = self.sample_space.to_dict()
        if self.decoder is None:
            del d["decoder"]  # what a router before decoders wrote
        else:
            d["decoder"] = self.decoder.to_dict()
        if self.conditioning == Conditioning.of(self.sample_space):
            del d["conditioning"]  # the default: what a router before the record wrote
        else:
            d["conditioning"] = self.conditioning.to_dict()
        d["example_prompts"] = list(self.example_prompts)
        if not d["example_prompts"]:
            del d["example_prompts"]  # what a router before them wrote
        return d

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> DeploymentDescriptor:
        """Parse and check what encode() wrote; anything else raises SchemaError."""
        try:
            d = json.loads(data)
        except (TypeError, ValueError, RecursionError) as exc:
            raise SchemaError(expected("a deployment descriptor as JSON", data)) from exc
        optional = ("sampling", "sample_space", "decoder", "conditioning", "example_prompts")
        d = _exact_keys("deployment descriptor", d, cls, optional=optional)
        for key in ("strategies", "class_names", "experts"):
            if not isinstance(d[key], list):
                raise SchemaError(expected(f"descriptor {key} as a list", d[key]))
        d["experts"] = tuple(ExpertInfo.from_dict(e) for e in d["experts"])
        if "sampling" in d:
            d["sampling"] = SamplingOffer.from_dict(d["sampling"])
        if "sample_space" in d:
            d["sample_space"] = SampleSpace.from_dict(d["sample_space"], "descriptor sample_space")
        if "decoder" in d:
            d["decoder"] = DecoderInfo.from_dict(d["decoder"], "descriptor decoder")
        if "conditioning" in d:
            d["conditioning"] = Conditioning.from_dict(d["conditioning"], "descriptor conditioning")
        d["strategies"], d["class_names"] = tuple(d["strategies"]), tuple(d["class_names"])
        return cls(**d)


def _exact_keys(what: str, d: object, cls: type, optional: tuple[str, ...] = ()) -> dict:
    """d, checked to hold every field of cls but `optional` ones, and nothing else."""
    names = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(d, dict) or not names - set(optional) <= set(d) <= names:
        got = sorted(d, key=str) if isinstance(d, dict) else type(d).__name__
        keys = f"keys {sorted(names - set(optional))}"
        keys += f" (optional: {sorted(optional)})" if optional else ""
        raise SchemaError(expected(f"{what} with {keys}", got))
    return dict(d)
