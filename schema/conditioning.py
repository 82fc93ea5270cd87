"""A deployment's conditioning: what a job's images are conditioned on, a record of the contract like the
sample space (docs/PROTOCOL.md section 9.2).

    none   nothing: every image is drawn from the null condition (an unconditional sample space)
    class  a class label per image: the sample space's classes, and its null class for an
           unconditional image (classifier-free guidance against it). What a deployment without the
           record means, exactly as before the record existed.
    text   a prompt per job (and an optional negative prompt), turned into embeddings once per job by
           the named text encoder; classifier-free guidance is against the empty prompt's embedding (as
           Paris does), or the negative prompt's. The sample space then has no classes: every label is
           its null label.

The text encoder is named by id and weights digest, with its tokenizer, token limit, embedding width
and whether the experts read every token's embedding ("tokens", [T, width], cross-attention) or one
pooled vector ("pooled", [width]). An expert trained on another encoder (another digest) is refused.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import dataclass

from .errors import SchemaError, expected
from .sample_space import SampleSpace

KINDS = ("none", "class", "text")
TEXT_FORMS = ("tokens", "pooled")
# A prompt is cut to its encoder's token limit (with a warning); this bounds the text before that, far
# above any prompt a token limit keeps (77 CLIP tokens are a few hundred characters).
MAX_PROMPT_CHARS = 2000
_DIGEST_RE = re.compile(r"[0-9a-f]{64}")
_NAME_RE = re.compile(r"[A-Za-z0-9_.:/@+-]{1,128}")
_ALLOWED_CONTROLS = {"\n", "\t"}  # a pasted prompt may hold line breaks and tabs


@dataclass(frozen=True)
class TextEncoderSpec:
    """Which text encoder turns a prompt into what the experts read."""

    encoder_id: str  # e.g. "sentence-transformers/all-MiniLM-L6-v2"
    digest: str  # sha256 (hex) of its weights: experts trained on another encoder are refused
    tokenizer: str  # e.g. "wordpiece", "clip-bpe"
    max_tokens: int  # the token limit; a longer prompt is cut (and said so)
    width: int  # the embedding width
    form: str = "tokens"  # "tokens": [max_tokens, width] per prompt; "pooled": [width]

    def __post_init__(self) -> None:
        for name in ("encoder_id", "tokenizer"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
                raise SchemaError(expected(f"text encoder {name} of 1..128 chars [A-Za-z0-9_.:/@+-]", value))
        if not isinstance(self.digest, str) or not _DIGEST_RE.fullmatch(self.digest):
            raise SchemaError(expected("text encoder digest, 64 lower-case hex digits (sha256)", self.digest))
        for name, hi in (("max_tokens", 4096), ("width", 16384)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= hi:
                raise SchemaError(expected(f"text encoder {name} an int in 1..{hi}", value))
        if self.form not in TEXT_FORMS:
            raise SchemaError(expected(f"text encoder form in {list(TEXT_FORMS)}", self.form))

    @property
    def embedding_shape(self) -> tuple[int, ...]:
        """One prompt's embedding: [max_tokens, width] (tokens) or [width] (pooled)."""
        return (self.max_tokens, self.width) if self.form == "tokens" else (self.width,)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)  # its fields, in order: what [conditioning.text] holds


@dataclass(frozen=True)
class Conditioning:
    """none, class or text (with its encoder). Conditioning.of(space) is the record's default."""

    kind: str = "class"
    text: TextEncoderSpec | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SchemaError(expected(f"conditioning kind in {list(KINDS)}", self.kind))
        if (self.kind == "text") != (self.text is not None):
            raise SchemaError(
                expected("a text encoder exactly when the kind is text", (self.kind, self.text))
            )

    @classmethod
    def of(cls, space: SampleSpace) -> Conditioning:
        """What a deployment without the record means: class labels, or none in an unconditional space."""
        return cls("class" if space.conditional else "none")

    def check_space(self, space: SampleSpace) -> None:
        """The record agrees with the sample space: class needs classes; none and text have none."""
        if (self.kind == "class") != space.conditional:
            raise SchemaError(
                expected(
                    f"a sample space {'with' if self.kind == 'class' else 'without'} classes for "
                    f"{self.kind} conditioning",
                    space.describe(),
                )
            )

    def to_dict(self) -> dict:
        out: dict = {"kind": self.kind}
        if self.text is not None:
            out["text"] = self.text.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: object, source: str = "conditioning") -> Conditioning:
        if not isinstance(data, dict) or set(data) - {"kind", "text"} or "kind" not in data:
            raise SchemaError(f"{source}: {expected('an object with kind (and text for kind text)', data)}")
        text = data.get("text")
        if text is not None:
            fields = set(TextEncoderSpec.__dataclass_fields__)
            if not isinstance(text, dict) or not set(text) <= fields:
                raise SchemaError(
                    f"{source}.text: {expected('the fields ' + ', '.join(sorted(fields)), text)}"
                )
            try:
                text = TextEncoderSpec(**text)
            except TypeError as exc:  # a field missing
                raise SchemaError(f"{source}.text: {exc}") from None
        return cls(data["kind"], text)

    def describe(self) -> str:
        if self.text is None:
            return {"class": "class labels", "none": "nothing (unconditional)"}[self.kind]
        t = self.text
        return f"prompts ({t.encoder_id}, {t.max_tokens} tokens x {t.width}, {t.form})"


def check_prompt(name: str, value: object) -> str:
    """A prompt as a job may carry it: text of at most MAX_PROMPT_CHARS characters, encodable as UTF-8,
    with no control characters but line breaks and tabs. SchemaError saying which rule it broke."""
    if not isinstance(value, str):
        raise SchemaError(expected(f"{name} as text", type(value).__name__))
    if len(value) > MAX_PROMPT_CHARS:
        raise SchemaError(expected(f"{name} of at most {MAX_PROMPT_CHARS} characters", f"{len(value)}"))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from JSON's "\ud800"
        raise SchemaError(expected(f"{name} of valid Unicode text", f"{exc.reason} at {exc.start}")) from None
    for i, ch in enumerate(value):
        if unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROLS:
            raise SchemaError(expected(f"{name} without control characters", f"U+{ord(ch):04X} at {i}"))
    return value


def text_sample_space(space: SampleSpace) -> SampleSpace:
    """`space` without its classes: the sample space of a text deployment and of its experts (every
    label is the null label, 0), same shape and value range."""
    return SampleSpace(space.shape, space.value_range)


def check_encoder(card: Conditioning | None, deployment: Conditioning | None) -> None:
    """An expert's conditioning (its card's; None: class labels, a card without the record) against the
    deployment's (None: class labels). Both must be of one kind, and a text expert must have trained on
    the deployment's text encoder: the same encoder id, weights digest, tokenizer, token limit, width and
    form. SchemaError naming both sides (both digests when they differ) otherwise."""
    card = card if card is not None else Conditioning()
    deployment = deployment if deployment is not None else Conditioning()
    if card.kind != deployment.kind:
        raise SchemaError(
            expected(
                f"an expert conditioned on {deployment.describe()} (the deployment's)",
                f"one conditioned on {card.describe()}",
            )
        )
    mine, theirs = card.text, deployment.text
    if mine is None or theirs is None or mine == theirs:
        return
    if mine.digest != theirs.digest:
        raise SchemaError(
            f"expected an expert trained on the deployment's text encoder {theirs.encoder_id} (weights "
            f"sha256 {theirs.digest}), got one trained on {mine.encoder_id} (weights sha256 {mine.digest})"
        )
    diffs = [
        f"{name} {getattr(mine, name)!r} vs {getattr(theirs, name)!r}"
        for name in TextEncoderSpec.__dataclass_fields__
        if getattr(mine, name) != getattr(theirs, name)
    ]
    raise SchemaError(
        expected("an expert whose text encoder is the deployment's (expert vs deployment)", "; ".join(diffs))
    )
