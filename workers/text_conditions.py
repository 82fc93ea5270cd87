"""A text expert's training prompts, encoded once before training: every image's prompt variants as
rows of one table of pooled embeddings, and each step's draw of one variant per image.

    table = encode_prompts(variants, load_text_encoder("pooled"))  # variants[i]: image i's prompts
    c = table.pick(idx, drop, rng)                                # f32 [B, width]

Row 0 of the table is the empty prompt "": conditioning dropout (TrainConfig.label_dropout) and an
image without any prompt (about 1% of emoji have no CLDR caption) train on it, which is what
classifier-free guidance reads as the unconditional branch at sampling. Each distinct prompt is encoded
once, however many images share it. Framework-free (numpy); the encoder is passed in, so this module
never imports torch. encode_each is the prompt-at-a-time loop both encoders (MiniLM, CLIP) run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ddm.schema.conditioning import TextEncoderSpec
from ddm.schema.errors import ConfigError, expected

EMPTY_PROMPT = ""


class PromptEncoder(Protocol):
    """What encode_prompts needs of ddm.workers.text_encoder.TextEncoder."""

    spec: TextEncoderSpec

    def encode(self, prompts: list[str]) -> tuple[np.ndarray, list[bool]]: ...


@dataclass(frozen=True)
class PromptTable:
    """embeddings f32 [P, width] (row 0: the empty prompt), and image i's prompt rows
    prompt_ids[offsets[i]:offsets[i + 1]] (at least one each: [0] for an image without a prompt)."""

    embeddings: np.ndarray
    offsets: np.ndarray  # int64 [N + 1]
    prompt_ids: np.ndarray  # int64 [offsets[-1]]
    spec: TextEncoderSpec
    uncaptioned: int = 0  # images that had no prompt (they train on the empty one)
    truncated: int = 0  # distinct prompts cut to the encoder's token limit

    @property
    def width(self) -> int:
        return int(self.embeddings.shape[1])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def empty(self) -> np.ndarray:
        """The empty prompt's embedding f32 [width]: the unconditional branch."""
        return self.embeddings[0]

    def pick(self, idx: np.ndarray, drop: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One prompt per row: for image idx[j] a uniformly drawn variant (one rng.random per row), the
        empty prompt where drop[j]. Returns f32 [len(idx), width]."""
        counts = self.offsets[idx + 1] - self.offsets[idx]
        k = np.minimum((rng.random(len(idx)) * counts).astype(np.int64), counts - 1)
        rows = np.where(drop, 0, self.prompt_ids[self.offsets[idx] + k])
        return self.embeddings[rows]

    def describe(self) -> str:
        return (
            f"{len(self)} images, {len(self.embeddings) - 1} distinct prompts ({self.spec.encoder_id}, "
            f"{self.spec.form} {self.width}), {self.uncaptioned} without a caption, {self.truncated} cut"
        )


def encode_each(
    prompts: list[str], spec: TextEncoderSpec, tokenize: Callable, embed: Callable
) -> tuple[np.ndarray, list[bool]]:
    """The one loop every text encoder runs: each prompt alone (so its bits never depend on the others in
    the call), tokenize(prompt) -> (ids, cut), embed(ids) -> its embedding, written from the row's start
    (a MiniLM tokens row is zero after the prompt's length). Returns float32 [N, *spec.embedding_shape]
    and per prompt whether it was cut to spec.max_tokens."""
    if isinstance(prompts, str):
        raise TypeError(expected("a list of prompts", "one str"))
    out = np.zeros((len(prompts), *spec.embedding_shape), np.float32)
    truncated = []
    for row, prompt in enumerate(prompts):
        ids, cut = tokenize(prompt)
        embedding = embed(ids)
        out[row, : len(embedding)] = embedding
        truncated.append(cut)
    return out, truncated


def encode_prompts(variants: Sequence[Sequence[str]], encoder: PromptEncoder) -> PromptTable:
    """The table of `variants` (image i's prompts; empty: the image trains on the empty prompt), every
    distinct prompt encoded once by `encoder` (form pooled: [width] per prompt)."""
    if encoder.spec.form != "pooled":
        raise ConfigError(expected("a pooled text encoder (tokens: not yet)", encoder.spec.form))
    index = {EMPTY_PROMPT: 0}
    offsets, ids, uncaptioned = [0], [], 0
    for prompts in variants:
        mine = [index.setdefault(p, len(index)) for p in dict.fromkeys(prompts)]
        if not mine:
            mine, uncaptioned = [0], uncaptioned + 1
        ids.extend(mine)
        offsets.append(len(ids))
    embeddings, truncated = encoder.encode(list(index))
    embeddings = np.asarray(embeddings, np.float32)
    if embeddings.shape != (len(index), encoder.spec.width):
        want = f"pooled embeddings [{len(index)}, {encoder.spec.width}]"
        raise ConfigError(expected(want, embeddings.shape))
    return PromptTable(
        embeddings,
        np.asarray(offsets, np.int64),
        np.asarray(ids, np.int64),
        encoder.spec,
        uncaptioned,
        int(sum(truncated)),
    )
