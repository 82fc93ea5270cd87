"""Submitting a job from the page: parse the form, validate it exactly as the CLI does (JobSpec, then
the serving router's deployment descriptor), refuse a job no live worker could serve, rate-limit per
client address, then Client.submit.

Errors are SubmitError with a `kind` the page shows as a heading and an HTTP status for the API:
bad_input (400), unauthorized (401: DDM_UI_TOKEN is set or keys are on, and the token or key is missing
or wrong), forbidden (403: the API key's scope is too small),
rate_limited (429), too_many_watches (429, watching: watch_gate.py), no_deployment (503: no router
publishes a descriptor), no_worker (503), unavailable (503).

Only what is queued counts against an address's submit budget: a request refused as bad input or for
want of a worker gives its place back. The token and the budget of wrong tokens are access.py's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from ddm.schema.conditioning import MAX_PROMPT_CHARS
from ddm.schema.descriptor import DIGITS, UNCONDITIONAL, DeploymentDescriptor, ExpertInfo, label_name
from ddm.schema.errors import DDMError, SchemaError, expected
from ddm.schema.flow import NULL_CLASS, NUM_CLASSES
from ddm.schema.messages import MAX_SAMPLES, MAX_SEED, JobSpec
from ddm.schema.solver import Grid, Solver
from ddm.schema.strategy import Strategy
from ddm.webui.cards import card_detail, card_text

MAX_IMAGES = MAX_SAMPLES  # JobSpec's limit on labels (images) per job
FORM_KEYS = {
    *("labels", "n_per_label", "steps", "strategy", "guidance", "seed", "solver", "grid"),
    *("prompt", "negative_prompt"),  # a text deployment's (schema/conditioning.py check_prompt)
}
KIND_STATUS = {
    "bad_input": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "rate_limited": 429,
    "too_many_watches": 429,
    "no_deployment": 503,
    "no_worker": 503,
    "unavailable": 503,
}


class SubmitError(DDMError):
    """A refused submission; `kind` in KIND_STATUS, `message` is meant for a person."""

    def __init__(self, kind: str, message: str, *, retry_after_s: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s

    @property
    def http_status(self) -> int:
        return KIND_STATUS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "kind": self.kind, "error": self.message}
        if self.retry_after_s is not None:
            out["retry_after_s"] = math.ceil(self.retry_after_s)
        return out


# ---------------------------------------------------------------- the deployment, as the page needs it


def labels_text(descriptor: DeploymentDescriptor | None, labels: Sequence[int]) -> str:
    """Labels by the deployment's class names: a run of digits as '5-9', other names listed, the null
    label as 'unconditional'."""
    names = descriptor.class_names if descriptor is not None else DIGITS
    null = null_label(descriptor)
    labels = sorted({null if y is None else y for y in labels})  # None: null, as a job now says it
    digits = all(y != null and names[y] == str(y) for y in labels)
    if digits and len(labels) > 2 and labels == list(range(labels[0], labels[-1] + 1)):
        return f"{labels[0]}-{labels[-1]}"
    return ", ".join(UNCONDITIONAL if y == null else label_name(y, names) for y in labels)


# An expert whose largest label share is at least this many times its labels' mean share (an uneven
# cluster, as k-means makes) is described by its largest shares, not by every label it saw:
# 'Ankle boot 60%, Bag 18%, ...'. Label splits and random shards are even (about 1.1 here).
UNEVEN_RATIO = 1.5
SHARES_SHOWN = 3


def trained_on(descriptor: DeploymentDescriptor, expert: ExpertInfo) -> str:
    """What an expert was trained on: its labels ('5-9'; 'Trouser, Dress' by class names), or where
    its cluster is uneven, its largest shares ('Ankle boot 60%, Bag 18%, Sneaker 12% and 7 more'); a
    text deployment's expert, 'captioned images' (its cluster has no labels to name)."""
    if prompted(descriptor):
        return "captioned images"
    counts, labels = expert.label_counts, expert.labels
    total = sum(counts)
    if not total or max(counts) * len(labels) < UNEVEN_RATIO * total:
        return labels_text(descriptor, labels)
    top = sorted(labels, key=lambda y: -counts[y])[:SHARES_SHOWN]
    text = ", ".join(f"{descriptor.label_name(y)} {_percent(counts[y] / total)}" for y in top)
    return f"{text} and {len(labels) - len(top)} more" if len(labels) > len(top) else text


def _percent(share: float) -> str:
    return "<1%" if share < 0.005 else f"{100 * share:.0f}%"


def describe_expert(descriptor: DeploymentDescriptor, expert_id: int) -> str:
    """'expert 1 (jax, trained on 5-9)': how the page names an expert in messages."""
    for e in descriptor.experts:
        if e.id == expert_id:
            return f"expert {expert_id} ({e.framework}, trained on {trained_on(descriptor, e)})"
    return f"expert {expert_id}"


def deployment_payload(descriptor: DeploymentDescriptor) -> dict[str, Any]:
    """The descriptor as the page uses it: experts with `classes` (their labels) and `trained_on` (the
    words the cluster panel and the legend show)."""
    d = descriptor.to_dict()
    # what each strategy does, from the one parser (the page does not parse strategies itself)
    d["strategy_hints"] = {s: Strategy.parse(s).describe() for s in descriptor.strategies}
    # the solvers and grids it serves ("sampling": a router from before solvers serves Euler on the
    # uniform grid only, and its descriptor decodes so), with the words and evaluations per step of each
    # from schema/solver.py, so the page parses neither and counts a job's evaluations as the router does
    sampling = descriptor.sampling
    d["solver_hints"] = {s: Solver.parse(s).describe() for s in sampling.solvers}
    d["solver_stages"] = {s: Solver.parse(s).stages for s in sampling.solvers}
    d["grid_hints"] = {g: Grid.parse(g).describe() for g in sampling.grids}
    space = sample_space(descriptor)
    # one sample's shape, value range and classes (the page sizes its tiles by it), and in words
    d["sample_space"] = space.to_dict() if space is not None else None
    d["sample_text"] = space.describe() if space is not None else None
    # what the page draws: a latent deployment's frames through its preview, its result decoded, both at
    # the decoder's pixel size; any other deployment's samples as they are
    image = descriptor.image_space
    d["image_shape"] = list(image.shape)
    d["latent_text"] = (
        f"latents {'x'.join(map(str, space.shape))} in [{space.value_range[0]:g}, {space.value_range[1]:g}] "
        f"({descriptor.decoder.encoder_id}), decoded to {image.describe()}"
        if descriptor.decoder is not None and space is not None
        else None
    )
    # what a job conditions on: "class" (the label chips), "none", or "text" (a prompt box instead, with the
    # encoder in words, the deployment's example prompts to click and the one limit on a prompt's length)
    d["conditioning_kind"] = descriptor.conditioning.kind
    d["conditioning_text"] = descriptor.conditioning.describe()
    d["example_prompts"] = list(descriptor.example_prompts)
    d["max_prompt_chars"] = MAX_PROMPT_CHARS
    d["null_label"] = null_label(descriptor)  # a job label: an unconditional image, shown as d["null_name"]
    d["null_name"] = UNCONDITIONAL
    # what a job with unconditional images gets when it names no strategy (the CLI's rule, one home:
    # DeploymentDescriptor.default_strategy_for: top1 where the default is the oracle), so the page
    # shows what will run and never preselects a strategy the server would refuse
    d["unconditional_strategy"] = descriptor.default_strategy_for(
        JobSpec.new([null_label(descriptor)], steps=1)
    )
    d["experts"] = [
        {
            "id": e.id,
            "framework": e.framework,
            "device": e.device,
            "classes": list(e.labels),
            "trained_on": trained_on(descriptor, e),
            "cluster": e.cluster,
            # the checkpoint's card as the router published it (None: a router from before cards), and
            # in the panel's words: 'DiT · Flax · DDPM ε (cosine)', every field in card_detail
            "card": _card(e),
            "card_text": card_text(_card(e)),
            "card_detail": card_detail(_card(e)),
        }
        for e in descriptor.experts
    ]
    return d


def _card(expert: ExpertInfo) -> dict[str, Any] | None:
    card = getattr(expert, "card", None)
    return dict(card) if card else None


def sample_space(descriptor: DeploymentDescriptor | None):
    """The descriptor's SampleSpace (schema/sample_space.py), or None where it has none to say."""
    return getattr(descriptor, "sample_space", None) if descriptor is not None else None


def null_label(descriptor: DeploymentDescriptor | None) -> int:
    """The label of an unconditional image: the sample space's null class (10 for the legacy space)."""
    space = sample_space(descriptor)
    return space.null_class if space is not None else NULL_CLASS


def num_classes(descriptor: DeploymentDescriptor | None) -> int:
    space = sample_space(descriptor)
    return space.num_classes if space is not None else NUM_CLASSES


def prompted(descriptor: DeploymentDescriptor | None) -> bool:
    """The deployment reads a prompt per job (text conditioning), not class labels."""
    return descriptor is not None and descriptor.conditioning.kind == "text"


# ---------------------------------------------------------------- form -> JobSpec


def split_token(data: object) -> tuple[object, str | None]:
    """A Socket.IO submit payload -> (the form, its "token" field): the token is not a job field."""
    if isinstance(data, Mapping) and "token" in data:
        form = {k: v for k, v in data.items() if k != "token"}
        token = data["token"]
        return form, token if isinstance(token, str) else None
    return data, None


def _number(data: Mapping, key: str, default: Any, *, integer: bool) -> Any:
    value = data.get(key, default)
    if value is None and default is not None:
        value = default
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SubmitError("bad_input", f"{key}: {expected(kind, value)}")
    if integer and isinstance(value, float):
        if not value.is_integer():
            raise SubmitError("bad_input", f"{key}: {expected(kind, value)}")
        value = int(value)
    if not math.isfinite(value):
        raise SubmitError("bad_input", f"{key}: {expected('a finite number', value)}")
    return value


def parse_form(data: object, descriptor: DeploymentDescriptor | None = None) -> JobSpec:
    """The page's form (JSON) -> JobSpec, or SubmitError(bad_input) saying what is wrong. Labels are
    read in the serving `descriptor`'s sample space (None: the legacy one, 10 classes).

    {"labels": [0..9 or null, ...] or "all" (0..9; null or "unconditional": an unconditional image; 10,
    the class count, is refused as a number: issue 40 item 3), "n_per_label":
    1.., "steps": 1..1000, "strategy": "oracle" | "top1" | "topk:K" | "full" or null, "guidance": 0..20 or
    null, "seed": 0..2^32-1 (left out: 0) or null (a random one), "solver": "euler" | "heun" | "midpoint"
    | "ab2" | "ab3" or null, "grid": "uniform" | "shift:S" | "edm[:R]" or null, "prompt" and
    "negative_prompt": text or null}. A strategy, guidance, solver or grid left out or null gets the
    serving deployment's default (the router resolves it); whether the deployment serves the solver and
    grid asked for is JobService.check's (the descriptor's) to say, and so is whether it reads a prompt
    or labels. A text deployment's job leaves labels out: n_per_label images of its prompt (each its
    null label). A prompt is checked by the schema's one rule (check_prompt: length, Unicode, control
    characters). Images are laid out row by row: row r holds sample r of each chosen label, in order.
    """
    if not isinstance(data, Mapping):
        raise SubmitError("bad_input", expected("a JSON object with the job's fields", type(data).__name__))
    unknown = sorted(set(map(str, data)) - FORM_KEYS)
    if unknown:
        raise SubmitError("bad_input", expected(f"only the fields {sorted(FORM_KEYS)}", unknown))
    labels = (
        _prompt_labels(data.get("labels"))
        if prompted(descriptor)
        else _labels(data.get("labels"), num_classes(descriptor))
    )
    n = _number(data, "n_per_label", 1, integer=True)
    if not 1 <= n <= MAX_IMAGES:
        raise SubmitError("bad_input", f"images per label: {expected(f'1..{MAX_IMAGES}', n)}")
    if len(labels) * n > MAX_IMAGES:
        raise SubmitError(
            "bad_input",
            f"{len(labels)} labels x {n} per label = {len(labels) * n} images; "
            f"a job has at most {MAX_IMAGES}",
        )
    steps = _number(data, "steps", 50, integer=True)
    guidance = None if data.get("guidance") is None else _number(data, "guidance", None, integer=False)
    seed = data.get("seed", 0)  # left out: 0, as the form and the CLI; null: a random one
    seed = random.randint(0, MAX_SEED) if seed is None else _number(data, "seed", 0, integer=True)
    strategy = data.get("strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise SubmitError("bad_input", f"strategy: {expected('a string', strategy)}")
    for key in ("solver", "grid"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            raise SubmitError("bad_input", f"{key}: {expected('a string', data.get(key))}")
    try:
        return JobSpec.new(
            [y for _ in range(n) for y in sorted(labels, key=lambda y: (y is None, y))],
            steps=steps,
            strategy=strategy,
            guidance=None if guidance is None else float(guidance),
            seed=seed,
            solver=data.get("solver"),
            grid=data.get("grid"),
            prompt=data.get("prompt"),
            negative_prompt=data.get("negative_prompt"),
        )
    except SchemaError as exc:
        raise SubmitError("bad_input", str(exc)) from None


def _prompt_labels(raw: object) -> list[int | None]:
    """A text deployment's labels: left out (or null), one unconditional row (None). Labels sent
    anyway are read as sent, so that the descriptor's check refuses them in its own words."""
    if raw is None:
        return [None]
    if not isinstance(raw, list) or not raw or not all(y is None or type(y) is int for y in raw):
        raise SubmitError("bad_input", f"labels: {expected('none (leave them out and send a prompt)', raw)}")
    return list(raw)


def _labels(raw: object, classes: int) -> list[int | None]:
    """Classes 0..K-1, or null / "unconditional" (None: an unconditional image); K as a number is a class
    past the last, refused naming the range."""
    if raw == "all":
        return list(range(classes))
    if not isinstance(raw, list) or not raw:
        raise SubmitError("bad_input", "labels: choose at least one label (or all)")
    raw = [None if y == UNCONDITIONAL else y for y in raw]
    for y in raw:
        if y is not None and (isinstance(y, bool) or not isinstance(y, int) or not 0 <= y < classes):
            what = f"labels 0..{classes - 1}, or null (or {UNCONDITIONAL!r}) for {UNCONDITIONAL} images"
            raise SubmitError("bad_input", f"labels: {expected(what, y)}")
    if len(set(raw)) != len(raw):
        raise SubmitError("bad_input", f"labels: {expected('each label at most once', raw)}")
    return list(raw)
