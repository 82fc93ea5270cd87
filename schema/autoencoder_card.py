"""The autoencoder card: what an autoencoder checkpoint declares, in its meta.json as "card".

A latent deployment's experts learn flows in the latent space of one autoencoder; its decoder turns a
job's final latent into pixels. The card is the contract between the two sides:

    encoder_id     "ae-" + the first 12 hex digits of the weights' sha256: names the latent space (a
                   latent dataset is "<dataset>~<encoder_id>", so every expert card's trained_on
                   partition names it too)
    pixel_space    the data's SampleSpace (3x32x32 in [-1, 1], its classes): what decoding yields
    latent_shape   (C, h, w) of one latent, e.g. 4x8x8
    value_range    the range of the normalised latents (a latent deployment's sample space declares it)
    shift, scale   normalisation fitted on the training latents: z = (encoder mean - shift) * scale,
                   shift one per latent channel, scale one number (unit variance, as LDM's scale_factor)
    preview        LatentPreview: a linear map latent -> RGB (the cheap preview diffusion UIs show),
                   fitted by least squares at training time
    trained_on     {"dataset", "split", "sha256", "count"}
    reconstruction measured on held-out data: {"split", "psnr_db", "fd", "fd_floor", ...}

Stdlib and numpy only (the web UI applies the preview without torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.sample_space import SampleSpace

CARD_FIELDS = (
    "encoder_id",
    "pixel_space",
    "latent_shape",
    "value_range",
    "shift",
    "scale",
    "preview",
    "trained_on",
    "reconstruction",
)
ENCODER_ID_PREFIX = "ae-"
LATENT_SEPARATOR = "~"  # "<dataset>~<encoder_id>": a dataset's latents under one encoder


def encoder_id_of(weights_sha256: str) -> str:
    """'ae-3f2a9c1b0d4e': the latent space's name, from the weights file's sha256."""
    return ENCODER_ID_PREFIX + weights_sha256[:12]


def latent_dataset_name(dataset: str, encoder_id: str) -> str:
    return f"{dataset}{LATENT_SEPARATOR}{encoder_id}"


def split_latent_name(name: str) -> tuple[str, str] | None:
    """'emoji~ae-3f2a9c1b0d4e' -> ('emoji', 'ae-3f2a9c1b0d4e'); None for a pixel dataset's name."""
    base, sep, encoder = name.partition(LATENT_SEPARATOR)
    if not sep:
        return None
    if not (base and encoder.startswith(ENCODER_ID_PREFIX) and len(encoder) == len(ENCODER_ID_PREFIX) + 12):
        raise ConfigError(expected("a latent dataset name '<dataset>~ae-<12 hex digits>'", name))
    return base, encoder


@dataclass(frozen=True)
class LatentPreview:
    """rgb = matrix @ z + bias at every latent position: matrix [3][C], bias [3], in the pixel space's
    value range. A look at a latent mid-flight, not a decoding."""

    matrix: tuple[tuple[float, ...], ...]
    bias: tuple[float, float, float]

    def __post_init__(self):
        rows = self.matrix
        ok = (
            isinstance(rows, tuple | list)
            and len(rows) == 3
            and all(isinstance(r, tuple | list) and len(r) == len(rows[0]) > 0 for r in rows)
            and all(np.isfinite(v) for r in rows for v in r)
        )
        if not ok:
            raise SchemaError(expected("preview matrix: 3 rows of C finite numbers", self.matrix))
        if not (len(self.bias) == 3 and all(np.isfinite(v) for v in self.bias)):
            raise SchemaError(expected("preview bias: 3 finite numbers", self.bias))
        object.__setattr__(self, "matrix", tuple(tuple(float(v) for v in r) for r in rows))
        object.__setattr__(self, "bias", tuple(float(v) for v in self.bias))

    @property
    def channels(self) -> int:
        return len(self.matrix[0])

    def apply(self, z: np.ndarray, upscale: int = 1) -> np.ndarray:
        """z float [n, C, h, w] -> RGB float32 [n, 3, h * upscale, w * upscale] (nearest upscaling, so
        the preview tiles are the decoded image's size)."""
        z = np.asarray(z, dtype=np.float32)
        if z.ndim != 4 or z.shape[1] != self.channels:
            raise SchemaError(expected(f"latents [n, {self.channels}, h, w] for the preview", z.shape))
        m = np.asarray(self.matrix, dtype=np.float32)
        rgb = np.einsum("kc,nchw->nkhw", m, z) + np.asarray(self.bias, np.float32)[None, :, None, None]
        if upscale > 1:
            rgb = rgb.repeat(upscale, axis=2).repeat(upscale, axis=3)
        return np.ascontiguousarray(rgb, dtype=np.float32)

    def to_dict(self) -> dict:
        return {"matrix": [list(r) for r in self.matrix], "bias": list(self.bias)}

    @classmethod
    def from_dict(cls, data: object, source: str = "preview") -> LatentPreview:
        if not (isinstance(data, dict) and set(data) == {"matrix", "bias"}):
            raise SchemaError(f"{source}: {expected('a JSON object with matrix and bias', data)}")
        try:
            return cls(tuple(tuple(r) for r in data["matrix"]), tuple(data["bias"]))
        except (TypeError, SchemaError) as exc:
            raise SchemaError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class AutoencoderCard:
    """See the module docstring. Checked when built."""

    encoder_id: str
    pixel_space: SampleSpace
    latent_shape: tuple[int, int, int]
    value_range: tuple[float, float]
    shift: tuple[float, ...]
    scale: float
    preview: LatentPreview
    trained_on: dict
    reconstruction: dict

    def __post_init__(self):
        if not (
            isinstance(self.encoder_id, str)
            and self.encoder_id.startswith(ENCODER_ID_PREFIX)
            and len(self.encoder_id) == len(ENCODER_ID_PREFIX) + 12
        ):
            raise SchemaError(expected("encoder_id 'ae-<12 hex digits>'", self.encoder_id))
        # the latent space's own checks (shape, range), without classes
        space = SampleSpace(tuple(self.latent_shape), tuple(self.value_range))
        object.__setattr__(self, "latent_shape", space.shape)
        object.__setattr__(self, "value_range", space.value_range)
        c = space.shape[0]
        if len(self.shift) != c or not all(np.isfinite(v) for v in self.shift):
            raise SchemaError(expected(f"shift: {c} finite numbers (one per latent channel)", self.shift))
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise SchemaError(expected("scale > 0", self.scale))
        if self.preview.channels != c:
            raise SchemaError(expected(f"a preview reading {c} latent channels", self.preview.channels))
        if self.pixel_space.shape[1] % space.shape[1] or self.pixel_space.shape[2] % space.shape[2]:
            raise SchemaError(
                expected(f"pixels a whole multiple of the latent {space.shape}", self.pixel_space.shape)
            )
        object.__setattr__(self, "shift", tuple(float(v) for v in self.shift))
        object.__setattr__(self, "scale", float(self.scale))

    @property
    def downsample(self) -> int:
        """Pixels per latent position along a side (4 for 32x32 -> 8x8)."""
        return self.pixel_space.shape[1] // self.latent_shape[1]

    def latent_space(self) -> SampleSpace:
        """The sample space of a deployment on these latents: the latent's shape and range, the data's
        classes."""
        p = self.pixel_space
        return SampleSpace(self.latent_shape, self.value_range, p.num_classes, p.class_names)

    def describe_latent(self) -> str:
        return (
            f"{self.encoder_id} latents {'x'.join(map(str, self.latent_shape))} in {list(self.value_range)}"
        )

    def to_dict(self) -> dict:
        return {
            "encoder_id": self.encoder_id,
            "pixel_space": self.pixel_space.to_dict(),
            "latent_shape": list(self.latent_shape),
            "value_range": list(self.value_range),
            "shift": list(self.shift),
            "scale": self.scale,
            "preview": self.preview.to_dict(),
            "trained_on": dict(self.trained_on),
            "reconstruction": dict(self.reconstruction),
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "card") -> AutoencoderCard:
        if not isinstance(data, dict):
            raise SchemaError(f"{source}: {expected('an autoencoder card (a JSON object)', data)}")
        missing = [f for f in CARD_FIELDS if f not in data]
        if missing:
            raise SchemaError(
                f"{source}: {expected('the fields ' + ', '.join(CARD_FIELDS), f'no {missing}')}"
            )
        try:
            return cls(
                encoder_id=data["encoder_id"],
                pixel_space=SampleSpace.from_dict(data["pixel_space"], f"{source}.pixel_space"),
                latent_shape=tuple(data["latent_shape"]),
                value_range=tuple(data["value_range"]),
                shift=tuple(data["shift"]),
                scale=data["scale"],
                preview=LatentPreview.from_dict(data["preview"], f"{source}.preview"),
                trained_on=dict(data["trained_on"]),
                reconstruction=dict(data["reconstruction"]),
            )
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class DecoderInfo:
    """What a latent deployment's descriptor says of its decoder: the latent space's name, the pixels
    decoding yields, and the preview the web UI applies to every step's latents."""

    encoder_id: str
    pixel_space: SampleSpace
    preview: LatentPreview

    @classmethod
    def of(cls, card: AutoencoderCard) -> DecoderInfo:
        return cls(card.encoder_id, card.pixel_space, card.preview)

    def upscale(self, latent_shape: tuple[int, int, int]) -> int:
        """Pixels per latent position along a side: the preview is drawn at the pixels' size."""
        return self.pixel_space.shape[1] // latent_shape[1]

    def to_dict(self) -> dict:
        return {
            "encoder_id": self.encoder_id,
            "pixel_space": self.pixel_space.to_dict(),
            "preview": self.preview.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "decoder") -> DecoderInfo:
        if not (isinstance(data, dict) and set(data) == {"encoder_id", "pixel_space", "preview"}):
            raise SchemaError(
                f"{source}: {expected('a JSON object with encoder_id, pixel_space, preview', data)}"
            )
        if not isinstance(data["encoder_id"], str):
            raise SchemaError(f"{source}: {expected('encoder_id a string', data['encoder_id'])}")
        return cls(
            data["encoder_id"],
            SampleSpace.from_dict(data["pixel_space"], f"{source}.pixel_space"),
            LatentPreview.from_dict(data["preview"], f"{source}.preview"),
        )
