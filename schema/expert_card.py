"""The expert card: what an expert checkpoint declares about itself, stored in its meta.json as "card".

    framework        "torch", "jax", ... (equals meta.json's `framework`)
    architecture     "unet", "dit", ... (equals meta.json's `architecture`; absent there = "unet")
    objective        what the network predicts:
                       flow-velocity  the velocity of the linear interpolant x_t = t x1 + (1 - t) x0
                                      (DESIGN.md's convention), d x / d(its own time)
                       ddpm-eps       the noise eps of a VP diffusion x = alpha x1 + sigma eps
                       ddpm-x0        the clean sample (DDPM's "x0": the data, x1 in our flow names)
                       ddpm-v         v = alpha eps - sigma x1 (Salimans & Ho's v-prediction)
    schedule         the VP schedule of a ddpm-* objective, alpha^2 + sigma^2 = 1, in diffusion time
                     tau in [0, 1] (tau = 0 data, tau = 1 noise); null for flow-velocity:
                       {"name": "linear", "beta_min": 0.1, "beta_max": 20.0}  continuous-time VP SDE
                           (Song et al.):
                           alpha(tau) = exp(-beta_min tau / 2 - (beta_max - beta_min) tau^2 / 4)
                       {"name": "cosine", "s": 0.008}  Nichol & Dhariwal:
                           alpha(tau) = cos((tau + s) / (1 + s) pi / 2) / cos(s / (1 + s) pi / 2)
                       {"name": "discrete-linear", "beta_start": 0.0001, "beta_end": 0.02, "steps": 1000}
                           DDPM's (DiT's; diffusers' DDPMScheduler "linear"): alpha_bar_i = prod_{j <= i}
                           (1 - beta_j), beta = linspace(beta_start, beta_end, steps) in float64; tau is the
                           index i = tau (steps - 1), alpha^2 log-linear in i between whole steps; the time
                           input is i (`Schedule.time_scale`: DiT's timestep 0 .. 999)
    time_convention  what the network's time input means: "t0-noise" (0 = noise, 1 = data: this
                     system's t; for a ddpm-* expert its input is 1 - tau) or "t0-data" (0 = data:
                     a ddpm-* expert's input is tau; a flow-velocity expert's time runs backwards,
                     so it predicts x0 - x1)
    sample_space     schema/sample_space.py's record
    trained_on       {"partition": the manifest's identity, "cluster": the expert's cluster id,
                      "label_counts": samples per class, "steps": optimizer steps}
    weights_sha256   sha256 of the weights file the card describes; null when not recorded
    conditioning     optional (schema/conditioning.py's record): what the expert is conditioned on.
                     Absent: class labels of its sample space (every card before the field). Written
                     for text experts: {"kind": "text", "text": the TextEncoderSpec it trained on
                     (encoder id, weights digest, tokenizer, max_tokens, width, form "pooled")}; its
                     sample space then has no classes

An expert whose meta.json has no card (every checkpoint written before cards) gets the LEGACY card
derived from its meta: flow-velocity, t0-noise, the LEGACY sample space, no weights digest. Such an
expert is served exactly as before: the flow-velocity / t0-noise objective is the identity and no
conversion runs at all (ddm.workers.objectives).

Converting every objective to the deployment's one velocity is ddm.workers.objectives; this module is
the record only (stdlib, no numpy needed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ddm.schema.conditioning import Conditioning
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.sample_space import LEGACY, SampleSpace

FLOW_VELOCITY = "flow-velocity"
OBJECTIVES: tuple[str, ...] = (FLOW_VELOCITY, "ddpm-eps", "ddpm-x0", "ddpm-v")
T0_NOISE, T0_DATA = "t0-noise", "t0-data"
TIME_CONVENTIONS: tuple[str, ...] = (T0_NOISE, T0_DATA)
# schedule name -> its parameters and their defaults
SCHEDULES: dict[str, dict[str, float]] = {
    "linear": {"beta_min": 0.1, "beta_max": 20.0},
    "cosine": {"s": 0.008},
    "discrete-linear": {"beta_start": 1e-4, "beta_end": 0.02, "steps": 1000.0},
}
DISCRETE_SCHEDULES = ("discrete-linear",)  # defined on whole steps; their time input is the step index
DEFAULT_SCHEDULE = "linear"  # what a ddpm-* objective named without a schedule gets (the CLI's default)
DEFAULT_ARCHITECTURE = "unet"  # meta.json without `architecture` (ddm.workers.architectures re-exports it)
CARD_FIELDS = (
    "framework",
    "architecture",
    "objective",
    "schedule",
    "time_convention",
    "sample_space",
    "trained_on",
    "weights_sha256",
)
OPTIONAL_CARD_FIELDS = ("conditioning",)  # absent: class labels (written only for text experts)
TRAINED_ON_FIELDS = ("partition", "cluster", "label_counts", "steps")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Schedule:
    """A named VP noise schedule and its parameters (sorted (name, value) pairs)."""

    name: str
    params: tuple[tuple[str, float], ...] = ()

    def __post_init__(self):
        if self.name not in SCHEDULES:
            raise SchemaError(expected(f"a schedule in {list(SCHEDULES)}", self.name))
        params = dict(self.params)
        allowed = SCHEDULES[self.name]
        if unknown := sorted(set(params) - set(allowed)):
            raise SchemaError(expected(f"{self.name} schedule parameters {list(allowed)}", unknown))
        merged = {}
        for key, default in allowed.items():
            value = params.get(key, default)
            if not (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)):
                raise SchemaError(expected(f"{self.name} schedule {key} a finite number", value))
            merged[key] = float(value)
        if self.name == "linear" and not 0 <= merged["beta_min"] <= merged["beta_max"]:
            raise SchemaError(expected("linear schedule 0 <= beta_min <= beta_max", merged))
        if self.name == "linear" and merged["beta_max"] <= 0:
            raise SchemaError(expected("linear schedule beta_max > 0", merged["beta_max"]))
        if self.name == "cosine" and not 0 <= merged["s"] < 1:
            raise SchemaError(expected("cosine schedule s in [0, 1)", merged["s"]))
        if self.name == "discrete-linear" and not 0 < merged["beta_start"] <= merged["beta_end"] < 1:
            raise SchemaError(expected("discrete-linear schedule 0 < beta_start <= beta_end < 1", merged))
        steps = merged.get("steps", 2.0)
        if steps != int(steps) or not 2 <= steps <= 100_000:
            raise SchemaError(expected("discrete-linear schedule steps a whole number in [2, 100000]", steps))
        object.__setattr__(self, "params", tuple(sorted(merged.items())))

    @classmethod
    def make(cls, name: str, **params: float) -> Schedule:
        return cls(name, tuple(params.items()))

    def param(self, key: str) -> float:
        return dict(self.params)[key]

    @property
    def time_scale(self) -> float:
        """The network's time input per unit of tau: steps - 1 (discrete: its step index), else 1."""
        return self.param("steps") - 1.0 if self.name in DISCRETE_SCHEDULES else 1.0

    def to_dict(self) -> dict:
        return {"name": self.name, **dict(self.params)}

    @classmethod
    def from_dict(cls, data: object, source: str = "schedule") -> Schedule:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            want = f'a JSON object {{"name": one of {list(SCHEDULES)}, parameters...}}'
            raise SchemaError(f"{source}: {expected(want, data)}")
        rest = {k: v for k, v in data.items() if k != "name"}
        try:
            return cls(data["name"], tuple(rest.items()))
        except SchemaError as exc:
            raise SchemaError(f"{source}: {exc}") from None

    @classmethod
    def parse(cls, text: str) -> Schedule:
        """'linear', 'linear:beta_min=0.1,beta_max=20' or 'cosine:s=0.008' (the CLI's --schedule)."""
        name, _, rest = text.strip().partition(":")
        params = {}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = item.partition("=")
            try:
                params[key.strip()] = float(value)
            except ValueError:
                eq = ""
            if not eq:
                raise SchemaError(expected("schedule parameters as key=number", item))
        return cls(name, tuple(params.items()))

    def describe(self) -> str:
        return f"{self.name}(" + ", ".join(f"{k}={v:g}" for k, v in self.params) + ")"


@dataclass(frozen=True)
class Objective:
    """What an expert predicts, under which schedule, with which time input."""

    name: str = FLOW_VELOCITY
    schedule: Schedule | None = None
    time_convention: str = T0_NOISE

    def __post_init__(self):
        if self.name not in OBJECTIVES:
            raise SchemaError(expected(f"an objective in {list(OBJECTIVES)}", self.name))
        if self.time_convention not in TIME_CONVENTIONS:
            raise SchemaError(
                expected(f"a time convention in {list(TIME_CONVENTIONS)}", self.time_convention)
            )
        if self.name == FLOW_VELOCITY and self.schedule is not None:
            raise SchemaError(
                expected("no schedule for flow-velocity (its interpolant is linear)", self.schedule)
            )
        if self.name != FLOW_VELOCITY and not isinstance(self.schedule, Schedule):
            raise SchemaError(expected(f"a VP schedule ({list(SCHEDULES)}) for {self.name}", self.schedule))

    @classmethod
    def parse(cls, name: str, schedule: str | None = None, time_convention: str = T0_NOISE) -> Objective:
        """From the CLI's words: a ddpm-* objective without a schedule gets DEFAULT_SCHEDULE."""
        if name != FLOW_VELOCITY and name in OBJECTIVES and not schedule:
            schedule = DEFAULT_SCHEDULE
        return cls(name, Schedule.parse(schedule) if schedule else None, time_convention)

    @property
    def is_identity(self) -> bool:
        """True when the expert already answers in the deployment's velocity at the deployment's t:
        nothing is converted, not even multiplied by 1."""
        return self.name == FLOW_VELOCITY and self.time_convention == T0_NOISE

    def describe(self) -> str:
        sched = f" under {self.schedule.describe()}" if self.schedule else ""
        return f"{self.name}{sched}, {self.time_convention}"


FLOW = Objective()  # this system's own: velocity of the linear interpolant, t = 0 noise


@dataclass(frozen=True)
class TrainedOn:
    """What an expert learnt from: the partition manifest's identity, its cluster, label counts, steps."""

    partition: dict = field(default_factory=dict)
    cluster: int = 0
    label_counts: tuple[int, ...] = ()
    steps: int = 0

    def __post_init__(self):
        if not isinstance(self.partition, dict):
            raise SchemaError(expected("trained_on.partition a JSON object", self.partition))
        if not (_is_int(self.cluster) and self.cluster >= 0):
            raise SchemaError(expected("trained_on.cluster an int >= 0", self.cluster))
        counts = tuple(self.label_counts) if isinstance(self.label_counts, list | tuple) else None
        if counts is None or not all(_is_int(n) and n >= 0 for n in counts):
            raise SchemaError(expected("trained_on.label_counts a list of ints >= 0", self.label_counts))
        if not (_is_int(self.steps) and self.steps >= 0):
            raise SchemaError(expected("trained_on.steps an int >= 0", self.steps))
        object.__setattr__(self, "label_counts", counts)

    @classmethod
    def from_meta(cls, meta: dict) -> TrainedOn:
        """From the fields training writes into meta.json (partition, expert, label_counts, steps)."""
        partition = meta.get("partition")
        return cls(
            partition=dict(partition) if isinstance(partition, dict) else {},
            cluster=int(meta.get("expert", 0)),
            label_counts=tuple(int(n) for n in meta.get("label_counts", ())),
            steps=int(meta.get("steps", 0)),
        )

    def to_dict(self) -> dict:
        return {
            "partition": dict(self.partition),
            "cluster": self.cluster,
            "label_counts": list(self.label_counts),
            "steps": self.steps,
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "trained_on") -> TrainedOn:
        if not isinstance(data, dict) or set(data) != set(TRAINED_ON_FIELDS):
            raise SchemaError(f"{source}: {expected(f'a JSON object with {list(TRAINED_ON_FIELDS)}', data)}")
        try:
            return cls(data["partition"], data["cluster"], data["label_counts"], data["steps"])
        except SchemaError as exc:
            raise SchemaError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class ExpertCard:
    """An expert's declaration (see the module docstring). `derived`: built from a meta.json without a
    card (the LEGACY card); not part of the record."""

    framework: str
    architecture: str = DEFAULT_ARCHITECTURE
    objective: Objective = FLOW
    sample_space: SampleSpace = LEGACY
    trained_on: TrainedOn = field(default_factory=TrainedOn)
    weights_sha256: str | None = None
    derived: bool = field(default=False, compare=False)
    conditioning: Conditioning | None = None  # None: class labels (the record absent)

    def __post_init__(self):
        for name in ("framework", "architecture"):
            if not (isinstance(getattr(self, name), str) and getattr(self, name)):
                raise SchemaError(expected(f"{name} a non-empty string", getattr(self, name)))
        digest = self.weights_sha256
        if digest is not None and not (
            isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
        ):
            raise SchemaError(expected("weights_sha256 64 lowercase hex digits, or null", digest))
        if self.conditioning is not None:
            if not isinstance(self.conditioning, Conditioning):
                raise SchemaError(expected("conditioning a Conditioning record", self.conditioning))
            self.conditioning.check_space(self.sample_space)
        counts = self.trained_on.label_counts
        if self.sample_space.conditional and counts and len(counts) != self.sample_space.num_classes:
            raise SchemaError(
                expected(
                    f"trained_on.label_counts, one per class ({self.sample_space.num_classes})", len(counts)
                )
            )

    @property
    def text_width(self) -> int:
        """The width of the prompt embedding a text expert reads (pooled, or each token's); 0 for any
        other."""
        text = self.conditioning.text if self.conditioning is not None else None
        return text.width if text is not None else 0

    @property
    def text_shape(self) -> tuple[int, ...]:
        """One prompt's embedding as a text expert reads it: (width,) pooled, (max_tokens, width) tokens;
        () for any other expert."""
        text = self.conditioning.text if self.conditioning is not None else None
        return text.embedding_shape if text is not None else ()

    def to_dict(self) -> dict:
        out = {
            "framework": self.framework,
            "architecture": self.architecture,
            "objective": self.objective.name,
            "schedule": self.objective.schedule.to_dict() if self.objective.schedule else None,
            "time_convention": self.objective.time_convention,
            "sample_space": self.sample_space.to_dict(),
            "trained_on": self.trained_on.to_dict(),
            "weights_sha256": self.weights_sha256,
        }
        if self.conditioning is not None:  # absent for class experts: their bytes as before the field
            out["conditioning"] = self.conditioning.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: object, source: str = "card") -> ExpertCard:
        """The record of `to_dict`, checked; SchemaError naming what was expected (an unknown objective,
        schedule or time convention names the allowed ones)."""
        if not isinstance(data, dict):
            raise SchemaError(f"{source}: {expected('a JSON object (the expert card)', data)}")
        unknown = sorted(set(data) - set(CARD_FIELDS) - set(OPTIONAL_CARD_FIELDS))
        missing = [f for f in CARD_FIELDS if f not in data]
        if unknown or missing:
            got = f"unknown {unknown}" if unknown else f"missing {missing}"
            raise SchemaError(f"{source}: {expected(f'the card fields {list(CARD_FIELDS)}', got)}")
        try:
            schedule = None if data["schedule"] is None else Schedule.from_dict(data["schedule"], "schedule")
            objective = Objective(data["objective"], schedule, data["time_convention"])
            conditioning = data.get("conditioning")
            if conditioning is not None:
                conditioning = Conditioning.from_dict(conditioning, "conditioning")
            return cls(
                framework=data["framework"],
                architecture=data["architecture"],
                objective=objective,
                sample_space=SampleSpace.from_dict(data["sample_space"]),
                trained_on=TrainedOn.from_dict(data["trained_on"]),
                weights_sha256=data["weights_sha256"],
                conditioning=conditioning,
            )
        except SchemaError as exc:
            raise SchemaError(f"{source}: {exc}") from None

    def describe(self) -> str:
        """One line for people: 'torch unet, ddpm-eps under linear(...), t0-data, 1x32x32 ...'."""
        legacy = " (derived: no card)" if self.derived else ""
        text = f", {self.conditioning.describe()}" if self.conditioning is not None else ""
        return (
            f"{self.framework} {self.architecture}, {self.objective.describe()}, "
            f"{self.sample_space.describe()}{text}{legacy}"
        )


def architecture_of(meta: dict) -> str:
    """meta.json's `architecture`; absent = DEFAULT_ARCHITECTURE (every checkpoint before the field)."""
    return meta.get("architecture", DEFAULT_ARCHITECTURE)


def legacy_card(meta: dict) -> ExpertCard:
    """The card of an expert whose meta.json has none: flow-velocity, t0-noise, LEGACY sample space."""
    return ExpertCard(
        framework=meta["framework"],
        architecture=architecture_of(meta),
        trained_on=TrainedOn.from_meta(meta),
        derived=True,
    )


def new_card(
    meta: dict,
    objective: Objective = FLOW,
    sample_space: SampleSpace = LEGACY,
    weights_sha256: str | None = None,
    conditioning: Conditioning | None = None,
) -> ExpertCard:
    """The card of an expert's meta record as built (framework, architecture and what it was trained
    on from the meta; the declared objective, sample space and conditioning from the caller)."""
    return ExpertCard(
        framework=meta["framework"],
        architecture=architecture_of(meta),
        objective=objective,
        sample_space=sample_space,
        trained_on=TrainedOn.from_meta(meta),
        weights_sha256=weights_sha256,
        conditioning=conditioning,
    )


def card_of(meta: dict, source: str = "meta.json") -> ExpertCard:
    """An expert meta record's card: its stored "card", checked, and agreeing with the meta's
    framework and architecture; the derived LEGACY card when it has none. ConfigError otherwise."""
    if "card" not in meta:
        return legacy_card(meta)
    try:
        card = ExpertCard.from_dict(meta["card"], f"{source} card")
    except SchemaError as exc:
        raise ConfigError(str(exc)) from None
    for name, value in (("framework", meta.get("framework")), ("architecture", architecture_of(meta))):
        if getattr(card, name) != value:
            want = f"the card's {name} equal to meta.json's {value!r}"
            raise ConfigError(f"{source}: {expected(want, getattr(card, name))}")
    return card


def stamp_card(meta: dict, weights_sha256: str | None) -> dict:
    """`meta` with its card brought up to date with the meta (framework, architecture, trained_on) and
    the digest of the weights just written; the declared objective and sample space are kept (LEGACY
    ones for a meta without a card). For every writer of expert weights (training, conversion)."""
    if "card" in meta:
        try:
            card = ExpertCard.from_dict(meta["card"])
        except SchemaError as exc:
            raise ConfigError(str(exc)) from None
    else:
        card = legacy_card(meta)
    fresh = new_card(meta, card.objective, card.sample_space, weights_sha256, card.conditioning)
    return {**meta, "card": fresh.to_dict()}


__all__ = [
    "CARD_FIELDS",
    "DEFAULT_ARCHITECTURE",
    "FLOW",
    "FLOW_VELOCITY",
    "OBJECTIVES",
    "OPTIONAL_CARD_FIELDS",
    "SCHEDULES",
    "TIME_CONVENTIONS",
    "ExpertCard",
    "Objective",
    "Schedule",
    "TrainedOn",
    "card_of",
    "legacy_card",
    "new_card",
    "stamp_card",
]
