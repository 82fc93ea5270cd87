"""CLIP's text model as a deployment's prompt encoder (Bagel's Paris reads CLIP ViT-L/14's), beside
workers/text_encoder.py's all-MiniLM-L6-v2, with the same interface: `.spec` and `.encode(prompts)`.

Loaded with transformers from two folders, as diffusers pipelines ship them: `text_encoder/` (a
CLIPTextModel's config.json and model.safetensors) and `tokenizer/` (a CLIPTokenizer's vocab.json and
merges.txt, or tokenizer.json, and tokenizer_config.json). Safetensors only: a folder without
model.safetensors is refused (pytorch_model.bin is never loaded: nothing is unpickled), and so is one
whose weights lack a tensor the model needs (transformers would fill it at random).

    spec = clip_text_spec("paris/text_encoder", "paris/tokenizer")     # reads no weights but the digest
    enc = load_clip_text_encoder("paris/text_encoder", "paris/tokenizer", spec=spec)
    emb, truncated = enc.encode(["a photo of a cat", ""])                # float32 [2, 77, 768]

Every prompt is tokenized as Paris (and Stable Diffusion) does: padding="max_length" to max_tokens (77),
truncation, <|startoftext|> ... <|endoftext|> then the folder's pad token (<|endoftext|> in
openai/clip-vit-large-patch14's; transformers' CLIPTokenizer normalises by NFC and lower case, no ftfy);
the model reads the ids with no attention mask (CLIP's causal mask only), and the embedding is
`last_hidden_state`, every one of the 77 positions, padding positions included: the experts read them
all. The guidance null is the encoding of "". A prompt longer than max_tokens - 2 BPE tokens is cut and
its truncated flag is True.

Each prompt is encoded alone (a batch of one), so its embedding does not depend on the others in the
call: the same prompt gives the same bits, in any batch. fp32, on the CPU by default; device "cuda"
(or "cuda:N", "auto") runs the model there, still fp32 (only the CPU path is tested here).

transformers is imported inside the functions that need it: importing ddm.workers never requires it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np

from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.conditioning import TextEncoderSpec
from ddm.schema.errors import ConfigError, expected

TOKENIZER = "clip-bpe"
DEFAULT_ENCODER_ID = "openai/clip-vit-large-patch14"
WEIGHTS = "model.safetensors"
MODEL_TYPE = "clip_text_model"
DEVICES = ("cpu", "auto", "cuda", "cuda:<n>")
# CLIP's own tokens for a known prompt: a tokenizer folder must give them (not, e.g., the 3-token
# tokenizer transformers 5 builds from CLIPTokenizer(vocab_file=..., merges_file=...)).
KNOWN_PROMPT, KNOWN_IDS = "a photo of a cat", [49406, 320, 1125, 539, 320, 2368, 49407]
_HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"the {what} folder has no {path.name}: {path.parent}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: {expected('a JSON object', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {expected('a JSON object', type(data).__name__)}")
    return data


def weights_file(text_dir: Path | str) -> Path:
    """text_dir/model.safetensors; ConfigError when there is none (whatever else the folder holds)."""
    folder = Path(text_dir)
    path = folder / WEIGHTS
    if path.is_file():
        return path
    others = sorted(p.name for p in folder.glob("*") if p.suffix in (".bin", ".pt", ".json", ".safetensors"))
    raise ConfigError(
        f"the CLIP text encoder folder {folder} has no {WEIGHTS} (safetensors only, one file; "
        f"pytorch_model.bin is never loaded): it holds {others or 'none of them'}"
    )


@functools.lru_cache(maxsize=4)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a weights file, once per process per file version (size and mtime)."""
    return file_sha256(Path(path))


def weights_digest(path: Path) -> str:
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _text_config(text_dir: Path) -> dict:
    config = _read_json(text_dir / "config.json", "CLIP text encoder")
    if config.get("model_type") != MODEL_TYPE:
        want = f"model_type {MODEL_TYPE!r} (a CLIPTextModel folder)"
        raise ConfigError(f"{text_dir / 'config.json'}: {expected(want, config.get('model_type'))}")
    for key in ("hidden_size", "max_position_embeddings", "vocab_size"):
        if type(config.get(key)) is not int or config[key] < 1:
            raise ConfigError(
                f"{text_dir / 'config.json'}: {expected(f'{key} a positive int', config.get(key))}"
            )
    return config


def _token_limit(tokenizer_dir: Path, positions: int) -> int:
    """tokenizer_config.json's model_max_length (absent or transformers' "unbounded" 1e30: none) capped by
    the model's positions."""
    config = _read_json(tokenizer_dir / "tokenizer_config.json", "CLIP tokenizer")
    limit = config.get("model_max_length", positions)
    if type(limit) not in (int, float) or not 3 <= limit < float("inf"):
        want = "model_max_length a number of at least 3"
        raise ConfigError(f"{tokenizer_dir / 'tokenizer_config.json'}: {expected(want, limit)}")
    return int(min(limit, positions))


def _encoder_id(config: dict, encoder_id: str | None, default_id: str) -> str:
    """The caller's id, else config.json's _name_or_path when it is a hub name (owner/name, not a local
    path), else `default_id`."""
    if encoder_id is not None:
        return encoder_id
    named = config.get("_name_or_path")
    if isinstance(named, str) and len(named) <= 128 and _HUB_NAME.fullmatch(named):
        return named
    return default_id


def clip_text_spec(
    text_dir: Path | str,
    tokenizer_dir: Path | str | None = None,
    encoder_id: str | None = None,
    default_id: str = DEFAULT_ENCODER_ID,
) -> TextEncoderSpec:
    """The TextEncoderSpec of a CLIP text_encoder/ folder (and its tokenizer/ folder; default: the same),
    without loading the model: digest = sha256 of model.safetensors, width = config's hidden_size,
    max_tokens = the tokenizer's model_max_length capped by max_position_embeddings, tokenizer
    "clip-bpe", form "tokens". ConfigError when a file is missing or not a CLIP text model's."""
    text_dir = Path(text_dir)
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir is not None else text_dir
    config = _text_config(text_dir)
    digest = weights_digest(weights_file(text_dir))
    max_tokens = _token_limit(tokenizer_dir, config["max_position_embeddings"])
    name = _encoder_id(config, encoder_id, default_id)
    try:
        return TextEncoderSpec(name, digest, TOKENIZER, max_tokens, config["hidden_size"], "tokens")
    except Exception as exc:  # SchemaError: an id or size out of the record's bounds
        raise ConfigError(f"{text_dir}: {exc}") from None


def torch_device(device: str) -> str:
    """cpu | auto (cuda when there is one, else cpu) | cuda | cuda:<n>, as torch names it."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if device != "cuda" and not re.fullmatch(r"cuda:[0-9]+", device or ""):
        raise ConfigError(expected(f"a text encoder device in {list(DEVICES)}", device))
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(device.partition(":")[2] or 0) >= count:
        raise ConfigError(expected(f"a CUDA device torch sees ({count} here) for the text encoder", device))
    return device


def _files_key(folder: Path) -> tuple:
    """What identifies a folder's files' versions (names, sizes, mtimes): a cache key."""
    return tuple(
        sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file())
    )


@functools.lru_cache(maxsize=2)
def _load(text_dir: str, tokenizer_dir: str, device: str, _versions: tuple):
    """(model, tokenizer), once per process per version of the folders' files."""
    import torch
    from transformers import CLIPTextModel, CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    model, info = CLIPTextModel.from_pretrained(
        text_dir,
        use_safetensors=True,  # never pytorch_model.bin
        local_files_only=True,
        output_loading_info=True,
        dtype=torch.float32,
    )
    missing = list(info.get("missing_keys", [])) + list(info.get("mismatched_keys", []))
    if missing:
        raise ConfigError(
            f"{text_dir}/{WEIGHTS} lacks {len(missing)} of the CLIP text model's tensors (or has them at "
            f"other shapes), e.g. {sorted(map(str, missing))[:3]}: refused rather than filled at random"
        )
    if len(tokenizer) != model.config.vocab_size or tokenizer(KNOWN_PROMPT)["input_ids"] != KNOWN_IDS:
        raise ConfigError(
            f"{tokenizer_dir}: expected CLIP's BPE tokenizer ({model.config.vocab_size} tokens, "
            f"{KNOWN_PROMPT!r} -> {KNOWN_IDS}), got {len(tokenizer)} tokens, "
            f"{KNOWN_PROMPT!r} -> {tokenizer(KNOWN_PROMPT)['input_ids']}"
        )
    return model.to(device).eval(), tokenizer


class ClipTextEncoder:
    """.spec (TextEncoderSpec) and .encode(prompts) -> (float32 [N, max_tokens, width], truncated flags)."""

    def __init__(self, spec: TextEncoderSpec, model, tokenizer, device: str = "cpu"):
        self.spec, self.model, self.tokenizer, self.device = spec, model, tokenizer, device

    def tokenize(self, prompt: str) -> tuple[list[int], bool]:
        """The max_tokens ids the model reads (padded with <|endoftext|>) and whether the prompt was cut."""
        if not isinstance(prompt, str):
            raise TypeError(expected("a prompt as str", type(prompt).__name__))
        limit = self.spec.max_tokens
        ids = self.tokenizer(prompt, padding="max_length", max_length=limit, truncation=True)["input_ids"]
        full = self.tokenizer(prompt, truncation=False, verbose=False)["input_ids"]
        return list(ids), len(full) > limit

    def encode(self, prompts: list[str]) -> tuple[np.ndarray, list[bool]]:
        """last_hidden_state of every prompt, all max_tokens positions: float32 [N, max_tokens, width]."""
        from ddm.workers.text_conditions import encode_each

        return encode_each(prompts, self.spec, self.tokenize, self._embed)

    def _embed(self, ids: list[int]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            hidden = self.model(input_ids=torch.tensor([ids], device=self.device)).last_hidden_state
        return hidden[0].float().cpu().numpy()  # [max_tokens, width]


def load_clip_text_encoder(
    text_dir: Path | str,
    tokenizer_dir: Path | str | None = None,
    *,
    spec: TextEncoderSpec | None = None,
    encoder_id: str | None = None,
    device: str = "cpu",
) -> ClipTextEncoder:
    """A CLIP text encoder from its folders (tokenizer_dir: default text_dir). With `spec` (a deployment's),
    ConfigError naming both when these files are not the encoder it names (its digest, token limit,
    width, tokenizer or form); its encoder_id is the spec's."""
    text_dir = Path(text_dir)
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir is not None else text_dir
    got = clip_text_spec(text_dir, tokenizer_dir, spec.encoder_id if spec is not None else encoder_id)
    if spec is not None and got != spec:
        raise ConfigError(
            f"the deployment's text encoder is {spec.to_dict()}, "
            f"these weights ({text_dir / WEIGHTS}) are {got.to_dict()}"
        )
    device = torch_device(device)
    versions = (_files_key(text_dir), _files_key(tokenizer_dir))
    model, tokenizer = _load(str(text_dir.resolve()), str(tokenizer_dir.resolve()), device, versions)
    return ClipTextEncoder(got, model, tokenizer, device)
