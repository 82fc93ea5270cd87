"""The one door every caller uses: `Expert.velocity(x, t, y, guidance, cond=, uncond=)` in numpy.

Framework-specific experts (workers/torch_expert/expert.py, workers/jax_expert/expert.py) implement
only `_forward` on a batch; this base class validates inputs, adds the null rows for classifier-free
guidance (the null class; for a text expert the unconditional prompt's embedding), and pads to a
fixed set of batch buckets where the backend needs static shapes (JAX, Neuron), so that no shape
outside the buckets is ever compiled.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddm.schema.errors import SchemaError, expected
from ddm.schema.expert_card import DEFAULT_ARCHITECTURE, ExpertCard, card_of
from ddm.schema.flow import NUM_CLASSES, guided_velocity
from ddm.schema.precision import DEFAULT_PRECISION
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.buckets import run_bucketed
from ddm.workers.checkpoint import architecture_name, config_of
from ddm.workers.objectives import conversion_for

DEFAULT_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class ExpertMeta:
    """What a caller may know about an expert without touching its weights."""

    framework: str  # a name in ddm.workers.frameworks.FRAMEWORKS
    preset: str
    config: Any  # the architecture's config object (its record's `config` class: UNetConfig for a UNet)
    expert: int  # cluster id in the partition it was trained on
    partition_id: str
    classes: tuple[int, ...]  # labels present in its training cluster
    steps: int  # training steps
    device: str  # where it runs now: cpu, cuda, neuron, cpu-traced, gpu
    path: str
    precision: str = DEFAULT_PRECISION  # fp32 | tf32 | bf16 (schema/precision.py)
    # its card (schema/expert_card.py): objective, time convention, sample space...; None: the LEGACY
    # card derived from the other fields (flow-velocity, t0-noise, 1x32x32, 10 classes)
    card: ExpertCard | None = None
    architecture: str = DEFAULT_ARCHITECTURE  # a name in ddm.workers.architectures

    @classmethod
    def from_json(cls, meta: dict, device: str, path: str, precision: str = DEFAULT_PRECISION) -> ExpertMeta:
        return cls(
            framework=meta["framework"],
            preset=meta.get("preset", "?"),
            config=config_of(meta),
            expert=int(meta.get("expert", 0)),
            partition_id=str(meta.get("partition", {}).get("id", "")),
            classes=tuple(int(c) for c in meta.get("classes", range(NUM_CLASSES))),
            steps=int(meta.get("steps", 0)),
            device=device,
            path=path,
            precision=precision,
            architecture=architecture_name(meta),
            card=card_of(meta, f"{path}/meta.json"),
        )


def check_inputs(
    x, t, y, guidance, space: SampleSpace = LEGACY
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate and normalise velocity inputs against the expert's sample space; returns x f32
    [B, C, H, W], t f32 [B], y i64 [B] (0 .. space.null_class), g f32 [B]."""
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim != 4 or x.shape[1:] != space.shape:
        raise SchemaError(
            expected(f"x float32 [B, {', '.join(map(str, space.shape))}]", f"{x.dtype} {x.shape}")
        )
    B = x.shape[0]
    t = np.asarray(t, dtype=np.float32)  # never reshaped: a 0-d or [B, 1] t is refused, not guessed at
    y = np.asarray(y)
    if t.shape != (B,):
        raise SchemaError(expected(f"t [B={B}]", t.shape))
    if y.shape != (B,) or not np.issubdtype(y.dtype, np.integer):
        raise SchemaError(expected(f"y integer [B={B}]", f"{y.dtype} {y.shape}"))
    if B and (y.min() < 0 or y.max() > space.null_class):
        raise SchemaError(expected(f"labels in [0, {space.null_class}]", (int(y.min()), int(y.max()))))
    return x, t, y.astype(np.int64), _guidance_rows(guidance, B)


def check_text_inputs(x, t, y, guidance, cond, uncond, shape: tuple[int, ...], space: SampleSpace):
    """Validate a text expert's inputs: x, t and guidance as check_inputs; cond float32 [B, *shape] (the
    prompt embeddings: shape (width,) pooled, (tokens, width) every token's); uncond float32 [B, *shape]
    (the empty or negative prompt's), required when any row's guidance is not 1; y None or the null label
    on every row. Returns x, t, cond, g, uncond (None when no row is guided)."""
    x = np.asarray(x)
    B = x.shape[0] if x.ndim == 4 else 0
    null = np.full(B, space.null_class, np.int64)
    if y is not None:
        y = np.asarray(y)
        if y.shape != (B,) or not np.issubdtype(y.dtype, np.integer) or (B and (y != space.null_class).any()):
            what = f"y omitted or the null label {space.null_class} on every row [B={B}] (a text expert)"
            raise SchemaError(expected(what, f"{y.dtype} {y.shape}"))
    x, t, _, g = check_inputs(x, t, null, guidance, space)
    cond = _embeddings("cond", cond, B, shape)
    guided = bool((g != 1.0).any())
    if uncond is None and guided:
        want = f"uncond float32 {_rows(B, shape)} (the empty or negative prompt's) for guidance != 1"
        raise SchemaError(expected(want, None))
    uncond = _embeddings("uncond", uncond, B, shape) if uncond is not None else None
    return x, t, cond, g, uncond


def _rows(B: int, shape: tuple[int, ...]) -> str:
    return f"[B={B}, {', '.join(map(str, shape))}]"


def _embeddings(name: str, value, B: int, shape: tuple[int, ...]) -> np.ndarray:
    """A [B, *shape] float32 array of prompt embeddings; SchemaError naming the shape otherwise."""
    a = np.asarray(value) if value is not None else None
    if a is None or a.dtype != np.float32 or a.shape != (B, *shape):
        got = "nothing" if a is None else f"{a.dtype} {a.shape}"
        raise SchemaError(expected(f"{name} float32 {_rows(B, shape)} (prompt embeddings)", got))
    return a


def _guidance_rows(guidance, B: int) -> np.ndarray:
    """guidance f32 [B]: a number means every row; an array must be [B] (a 0-d array is refused)."""
    if isinstance(guidance, numbers.Real) and not isinstance(guidance, bool | np.ndarray):
        return np.full(B, guidance, np.float32)
    g = np.asarray(guidance, dtype=np.float32)
    if g.shape != (B,):
        raise SchemaError(expected(f"guidance, a number or [B={B}]", g.shape))
    return g.copy()


class Expert(ABC):
    """A loaded expert. Subclasses set `meta` and `buckets` and implement `_forward`."""

    meta: ExpertMeta
    # Batch sizes the backend runs; None = any size (eager PyTorch). Padded to the next one otherwise.
    buckets: tuple[int, ...] | None = None
    max_batch: int = 256  # larger inputs are split into chunks of this many rows
    # what loading compiled: {"compiled": buckets compiled, "loaded": buckets from a cache, "compile_s"}
    compile_report: dict | None = None
    weights_bytes: int | None = None  # what its weights hold in memory as served (heartbeat, `ddm workers`)

    @property
    def card(self) -> ExpertCard:
        """The expert's card (schema/expert_card.py); the derived LEGACY card for a meta without one."""
        card = getattr(self.meta, "card", None)
        if card is None:
            meta = self.meta
            card = ExpertCard(framework=meta.framework, architecture=meta.architecture, derived=True)
        return card

    @property
    def text_width(self) -> int:
        """The prompt embedding's width a text expert reads (its card's; the config's text_width
        agrees, checked at load); 0 for a class expert."""
        return self.card.text_width

    def velocity(self, x, t, y=None, guidance=1.0, *, cond=None, uncond=None) -> np.ndarray:
        """v(x, t, y) with classifier-free guidance, in the deployment's one velocity convention
        (schema/flow.py) whatever the expert was trained to predict (its card's objective).

        x float32 [B, C, H, W] (the card's sample space; LEGACY: [B,1,32,32]), t float32 [B] in [0,1],
        y int64 [B] (a class, or the null class = unconditional: 10 in LEGACY), guidance a number or [B].
        Rows whose guidance is not 1 get an extra null row in the same forward pass:
        v = v_null + g * (v_y - v_null). Returns float32 [B, C, H, W].

        A text expert (text_width > 0) reads cond float32 [B, *card.text_shape], the prompt embeddings
        ([B, width] pooled; [B, tokens, width] every token's, as Paris's experts read CLIP's), and for
        guided rows uncond of the same shape (the empty or the negative prompt's): its null
        rows; y is then omitted or the null label. A class expert refuses cond and uncond.
        """
        card = self.card
        x, t, c, g, null = self._inputs(x, t, y, guidance, cond, uncond)
        B = len(x)
        guided = np.flatnonzero(g != 1.0)
        if len(guided):
            x = np.concatenate([x, x[guided]])
            t = np.concatenate([t, t[guided]])
            c = np.concatenate([c, null[guided]])
        conversion = conversion_for(card.objective, card.sample_space.value_range)
        if conversion is None:  # flow-velocity, t0-noise: the network's output is the answer, as is
            v = self._run(x, t, c)
        else:
            # Converted row by row (time mapping and x rescale before the forward, the prediction to
            # x1 - x0 after: ddm.workers.objectives), THEN guided. The conversion is affine in the
            # prediction for fixed x and t, so guiding converted velocities equals converting the
            # guided prediction (tests/workers/test_objectives.py checks it).
            v = conversion.velocity(lambda x_in, s: self._run(x_in, s, c), x, t)
        out = v[:B].copy()
        if len(guided):
            out[guided] = guided_velocity(out[guided], v[B:], g[guided])
        return out

    def _inputs(self, x, t, y, guidance, cond, uncond):
        """Checked inputs: x, t, the conditioning c (labels i64 [B] or embeddings f32 [B, width]), the
        guidance g f32 [B] and the null conditioning of every row (the null class, or uncond)."""
        space = self.card.sample_space
        if self.text_width:
            shape = self.card.text_shape
            x, t, c, g, null = check_text_inputs(x, t, y, guidance, cond, uncond, shape, space)
            return x, t, c, g, null
        if cond is not None or uncond is not None:
            raise SchemaError(expected("no cond or uncond for a class-conditioned expert (y labels)", "them"))
        if y is None:
            raise SchemaError(expected(f"y integer [B] labels in [0, {space.null_class}]", None))
        x, t, y, g = check_inputs(x, t, y, guidance, space)
        return x, t, y, g, np.full(len(y), space.null_class, dtype=np.int64)

    def _run(self, x: np.ndarray, t: np.ndarray, c: np.ndarray) -> np.ndarray:
        limit = self.buckets[-1] if self.buckets else self.max_batch
        return run_bucketed(self._forward, (x, t, c), self.buckets, limit)

    def null_condition(self, rows: int) -> np.ndarray:
        """Zeros of what `_forward` reads as c: labels i64 [rows], or embeddings f32 [rows, *text_shape]."""
        if self.text_width:
            return np.zeros((rows, *self.card.text_shape), np.float32)
        return np.zeros(rows, np.int64)

    def warmup(self) -> None:
        """Run every bucket once (compiles them where the backend compiles)."""
        for b in self.buckets or (1,):
            x = np.zeros((b, *self.card.sample_space.shape), np.float32)
            self._forward(x, np.zeros(b, np.float32), self.null_condition(b))

    @abstractmethod
    def _forward(self, x: np.ndarray, t: np.ndarray, c: np.ndarray) -> np.ndarray:
        """x f32 [b,C,H,W], t f32 [b], c the conditioning: labels i64 [b], or for a text expert the prompt
        embeddings f32 [b, *card.text_shape] -> v f32 [b,C,H,W]; b is a bucket when buckets is set."""
