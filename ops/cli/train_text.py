"""`ddm train expert --text pooled`: a text-conditioned expert. Its images' captions (the emoji
datasets' CLDR names and keyword variants: ddm.ops.data.emoji_captions) are encoded ONCE, before
training, by the pooled text encoder (ddm.workers.text_encoder); each step draws one variant per image,
and conditioning dropout (the label-dropout probability) trains the empty prompt, as does every image
without a caption. The expert's card records the encoder (id, weights digest, tokenizer, token limit,
width, form); its sample space is the dataset's without classes (a text deployment's)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from ddm.schema.conditioning import TEXT_FORMS, Conditioning, text_sample_space
from ddm.schema.errors import ConfigError, expected
from ddm.schema.sample_space import SampleSpace
from ddm.workers.text_conditions import PromptEncoder, PromptTable

SUPPORTED_FORMS = ("pooled",)  # "tokens" (cross-attention) is not built yet


def add_text_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--text",
        default=None,
        choices=TEXT_FORMS,
        help="train a text-conditioned expert on the dataset's captions (emoji, emoji-64), the prompts "
        "encoded once by all-MiniLM-L6-v2; pooled: one 384-wide embedding per prompt in the class "
        "embedding's place (tokens: not yet). Default: class labels",
    )
    parser.add_argument(
        "--prompt-embeddings",
        default=None,
        help="with --text: read the captions' embeddings from this file (`ddm data embed-captions`) "
        "instead of loading the encoder (on a machine without its wheel too)",
    )


@dataclass(frozen=True)
class TextTraining:
    """What a text expert's run needs beside a class expert's."""

    space: SampleSpace  # the dataset's, without classes
    conditioning: Conditioning  # kind text, the encoder's spec
    table: PromptTable  # row i: image i of the cluster's prompts, encoded
    record: dict  # meta.json's "prompts": where the captions came from, how many, how many cut
    encoder: PromptEncoder  # what encoded them (the encoder, or the stored file)

    def heldout_conditions(self, dataset_name: str, split: str, data_dir) -> dict[str, np.ndarray]:
        """A prompt-aware router's two readings of `split`'s images (row for row): each image's caption
        (its CLDR name) and the empty prompt (x_t alone)."""
        from ddm.ops.data.caption_features import name_embeddings

        prompts = name_embeddings(dataset_name, split, data_dir, self.encoder)
        empty = np.repeat(self.table.empty[None], len(prompts), axis=0)
        return {"with the prompt": prompts, "the empty prompt": empty}


def prepare_text(
    form: str, dataset_name: str, split: str, data_dir, idx, space: SampleSpace, stored: str | None = None
) -> TextTraining:
    """The captions of images `idx` of load_dataset(dataset_name, split), encoded by the `form` encoder
    (or read from the `stored` file of `ddm data embed-captions`)."""
    from ddm.ops.data.caption_features import name_encoder
    from ddm.ops.data.emoji_captions import load_captions
    from ddm.workers.text_conditions import encode_prompts

    if form not in SUPPORTED_FORMS:
        raise ConfigError(expected(f"--text in {list(SUPPORTED_FORMS)} (tokens: not yet)", form))
    captions = load_captions(dataset_name, split, data_dir)
    encoder = name_encoder(stored, form)
    variants = [captions.variants[i] for i in idx]
    print(f"encoding the captions of {len(variants)} images once ({encoder.spec.encoder_id}, {form}) ...")
    table = encode_prompts(variants, encoder)
    print(f"prompts: {table.describe()}")
    if table.truncated:
        print(f"warning: {table.truncated} prompts were cut to {encoder.spec.max_tokens} tokens")
    record = {
        "captions": "emoji CLDR annotations (ddm.ops.data.emoji_captions)",
        "sources": captions.sources,
        "images": len(table),
        "distinct_prompts": len(table.embeddings) - 1,
        "uncaptioned": table.uncaptioned,
        "truncated": table.truncated,
    }
    return TextTraining(text_sample_space(space), Conditioning("text", encoder.spec), table, record, encoder)
