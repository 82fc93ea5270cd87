"""The sample space: what one sample of a deployment is, and what it may be conditioned on.

    shape        (C, H, W): channels, height, width of one sample
    value_range  (lo, hi): the range data samples are scaled to (noise is N(0, I) whatever it is)
    num_classes  labels 0 .. num_classes - 1; 0 means unconditional
    class_names  one non-empty name per label (empty when unconditional)
    null_class   derived, = num_classes: the label of the unconditional branch of classifier-free
                 guidance (label dropout in training, the null rows at sampling); an unconditional
                 space has only this label, 0

The sample space belongs to the deployment; every expert card (schema/expert_card.py) declares the
one its expert was trained in, and a deployment whose experts declare different ones is refused.

LEGACY is today's space: 1x32x32 in [-1, 1] (MNIST 28x28 padded to 32), 10 classes named by the
digits. Every record written before sample spaces were recorded (a meta.json without a card, a
descriptor without the field) means LEGACY. This module is the only place outside schema/flow.py's
re-exports that may name those numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddm.schema.errors import SchemaError, expected

FIELDS = ("shape", "value_range", "num_classes", "class_names")
# Bounds a record checked without its space still holds to (a message decoded with no space at hand):
# labels 0..MAX_CLASSES (the null label of the largest space), at most MAX_SAMPLE_NUMBERS per sample.
MAX_CLASSES = 100_000
MAX_SAMPLE_NUMBERS = 4 * 512 * 512


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class SampleSpace:
    """One sample's shape and value range, and its conditioning. Checked when built."""

    shape: tuple[int, int, int]
    value_range: tuple[float, float] = (-1.0, 1.0)
    num_classes: int = 0
    class_names: tuple[str, ...] = ()

    def __post_init__(self):
        shape = tuple(self.shape) if isinstance(self.shape, tuple | list) else self.shape
        if not (isinstance(shape, tuple) and len(shape) == 3 and all(_is_int(n) and n > 0 for n in shape)):
            raise SchemaError(expected("shape (C, H, W), three positive ints", self.shape))
        rng = tuple(self.value_range) if isinstance(self.value_range, tuple | list) else self.value_range
        if not (
            isinstance(rng, tuple) and len(rng) == 2 and all(_is_number(v) for v in rng) and rng[0] < rng[1]
        ):
            raise SchemaError(
                expected("value_range (lo, hi), two finite numbers with lo < hi", self.value_range)
            )
        if math.prod(shape) > MAX_SAMPLE_NUMBERS:
            raise SchemaError(expected(f"shape of at most {MAX_SAMPLE_NUMBERS} numbers", self.shape))
        if not (_is_int(self.num_classes) and 0 <= self.num_classes <= MAX_CLASSES):
            raise SchemaError(
                expected(
                    f"num_classes an int >= 0 (0 = unconditional), at most {MAX_CLASSES}", self.num_classes
                )
            )
        names = tuple(self.class_names) if isinstance(self.class_names, tuple | list) else self.class_names
        if not (
            isinstance(names, tuple)
            and len(names) == self.num_classes
            and all(isinstance(n, str) and n for n in names)
        ):
            raise SchemaError(
                expected(
                    f"class_names, {self.num_classes} non-empty strings (one per class)", self.class_names
                )
            )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "value_range", (float(rng[0]), float(rng[1])))
        object.__setattr__(self, "class_names", names)

    @property
    def null_class(self) -> int:
        """The label of the unconditional branch (classifier-free guidance): num_classes."""
        return self.num_classes

    @property
    def conditional(self) -> bool:
        return self.num_classes > 0

    @property
    def size(self) -> int:
        """Numbers per sample: C * H * W."""
        c, h, w = self.shape
        return c * h * w

    def batch_shape(self, dims: str = "B") -> str:
        """'[B, 1, 32, 32]': the shape of a batch of samples, as errors name it."""
        return "[" + ", ".join((dims, *map(str, self.shape))) + "]"

    def describe(self) -> str:
        """'1x32x32 in [-1, 1], 10 classes (0, 1, ...)' or '3x32x32 in [-1, 1], unconditional'."""
        c, h, w = self.shape
        lo, hi = self.value_range
        text = f"{c}x{h}x{w} in [{lo:g}, {hi:g}]"
        if not self.conditional:
            return text + ", unconditional"
        names = ", ".join(self.class_names[:4]) + (", ..." if self.num_classes > 4 else "")
        return text + f", {self.num_classes} classes ({names})"

    def describe_difference(self, other: SampleSpace) -> str:
        """'' when the spaces are equal, else what differs, field by field, this one's value first:
        'shape 1x32x32 vs 3x32x32; class_names differ at label 3 ('3' vs 'dress')'. For refusals."""
        diffs = []
        if self.shape != other.shape:
            diffs.append(f"shape {'x'.join(map(str, self.shape))} vs {'x'.join(map(str, other.shape))}")
        if self.value_range != other.value_range:
            diffs.append(f"value_range {list(self.value_range)} vs {list(other.value_range)}")
        if self.num_classes != other.num_classes:
            diffs.append(f"num_classes {self.num_classes} vs {other.num_classes}")
        elif self.class_names != other.class_names:
            k = next(
                i for i, (a, b) in enumerate(zip(self.class_names, other.class_names, strict=True)) if a != b
            )
            diffs.append(
                f"class_names differ at label {k} ({self.class_names[k]!r} vs {other.class_names[k]!r})"
            )
        return "; ".join(diffs)

    def to_dict(self) -> dict:
        """JSON-ready: lists for the tuples."""
        return {
            "shape": list(self.shape),
            "value_range": list(self.value_range),
            "num_classes": self.num_classes,
            "class_names": list(self.class_names),
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "sample_space") -> SampleSpace:
        """The record of `to_dict`, checked: a JSON object with exactly FIELDS (class_names may be absent
        for an unconditional space). SchemaError saying what was expected otherwise."""
        if not isinstance(data, dict):
            raise SchemaError(f"{source}: {expected('a JSON object with ' + ', '.join(FIELDS), data)}")
        unknown = sorted(set(data) - set(FIELDS))
        missing = [f for f in ("shape", "value_range", "num_classes") if f not in data]
        if unknown or missing:
            got = f"unknown {unknown}" if unknown else f"missing {missing}"
            raise SchemaError(f"{source}: {expected('the fields ' + ', '.join(FIELDS), got)}")
        for field in ("shape", "value_range"):
            if not isinstance(data[field], list | tuple):
                raise SchemaError(f"{source}: {expected(f'{field} a list', data[field])}")
        names = data.get("class_names", [])
        if not isinstance(names, list | tuple):
            raise SchemaError(f"{source}: {expected('class_names a list of strings', names)}")
        try:
            return cls(tuple(data["shape"]), tuple(data["value_range"]), data["num_classes"], tuple(names))
        except SchemaError as exc:
            raise SchemaError(f"{source}: {exc}") from None


DIGIT_NAMES: tuple[str, ...] = tuple(str(d) for d in range(10))
# Today's space: MNIST / Fashion-MNIST 28x28 padded to 1x32x32, in [-1, 1], 10 classes named by digits
# (a deployment file may rename them for display: Fashion-MNIST's deployment does).
LEGACY = SampleSpace(shape=(1, 32, 32), value_range=(-1.0, 1.0), num_classes=10, class_names=DIGIT_NAMES)
DEFAULT = LEGACY  # what a record that names no sample space means
