"""Caption features: each image of a captioned dataset (emoji) as the pooled text embedding of its CLDR
name, the rows `ddm partition --by kmeans:K --features captions` clusters. Such clusters are ones a
prompt can name: a router reading the prompt finds an unseen emoji's cluster from its name alone, where
clusters of pixels leave it to x_t (docs/RESULTS.md, "Which clusters for text").

An image without a name reads the empty prompt's embedding, as it does in training."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CAPTIONS = "captions"  # the --features value, and the source a manifest's k-means records


@dataclass(frozen=True, eq=False)
class CaptionFeatures:
    """One split's name embeddings, row for row with load_dataset(dataset, split)."""

    name: str  # CAPTIONS
    split: str
    labels: np.ndarray  # int64 [N]: the dataset's, so check_same_rows can compare
    images: np.ndarray  # float32 [N, width]: what k-means reads


def name_embeddings(dataset_name: str, split: str, data_dir, encoder) -> np.ndarray:
    """float32 [N, width]: the split's images' CLDR names encoded by `encoder` (a PromptEncoder), the
    empty prompt for an image without one."""
    from ddm.ops.data.emoji_captions import load_captions
    from ddm.workers.text_conditions import EMPTY_PROMPT

    names = [name or EMPTY_PROMPT for name in load_captions(dataset_name, split, data_dir).captions]
    prompts, _ = encoder.encode(names)
    return np.asarray(prompts, np.float32)


def name_encoder(stored: str | None = None, form: str = "pooled"):
    """The `form` text encoder, or the stored embeddings of `ddm data embed-captions` (a file)."""
    if stored is not None:
        from ddm.workers.stored_prompts import StoredPrompts

        return StoredPrompts(stored)
    from ddm.workers.text_encoder import load_text_encoder

    return load_text_encoder(form)


def caption_features(
    dataset_name: str, split: str, data_dir=None, stored: str | None = None
) -> CaptionFeatures:
    """The name embeddings of load_dataset(dataset_name, split) (a latent dataset's are its source's)."""
    from ddm.ops.data.dataset import load_dataset

    labels = np.asarray(load_dataset(dataset_name, split, data_dir).labels)
    images = name_embeddings(dataset_name, split, data_dir, name_encoder(stored))
    return CaptionFeatures(CAPTIONS, split, labels, images)
