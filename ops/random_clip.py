"""A tiny CLIP text encoder in transformers' folder layout (Paris's `text_encoder/` and `tokenizer/`),
random weights at a small width, and CLIP's REAL byte-level BPE vocabulary:

    text_dir/config.json, text_dir/model.safetensors         CLIPTextModel.save_pretrained (safetensors)
    tokenizer_dir/vocab.json, merges.txt, special_tokens_map.json, tokenizer_config.json

The vocabulary comes from the file the open_clip_torch wheel ships (`bpe_simple_vocab_16e6.txt.gz`,
installed --no-deps: found with importlib.util.find_spec, open_clip never imported), turned into
vocab.json and merges.txt exactly as CLIP builds its encoder (open_clip/tokenizer.py SimpleTokenizer):
the 256 byte-level characters, the same with "</w>", the merges of lines 1..48894 joined, then
<|startoftext|> (49406) and <|endoftext|> (49407). tokenizer_config.json and special_tokens_map.json are
openai/clip-vit-large-patch14's: model_max_length 77, padding with <|endoftext|>.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

VOCAB_SIZE = 49408
POSITIONS = 77
BOS, EOS = "<|startoftext|>", "<|endoftext|>"
MERGES = 49152 - 256 - 2  # CLIP's: lines 1..48894 of the BPE file


def bpe_file() -> Path:
    """open_clip's bpe_simple_vocab_16e6.txt.gz, found without importing open_clip."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "CLIP's BPE vocabulary comes from open_clip_torch: pip install --no-deps open_clip_torch==3.3.0",
            name="open_clip",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "bpe_simple_vocab_16e6.txt.gz"


def _bytes_to_unicode() -> list[str]:
    """GPT-2's and CLIP's 256 printable stand-ins for the bytes 0..255, in CLIP's vocabulary order."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def clip_vocab() -> tuple[dict[str, int], list[str]]:
    """(vocab token -> id, merges as "a b" lines) of CLIP's tokenizer."""
    with gzip.open(bpe_file()) as f:
        lines = f.read().decode("utf-8").split("\n")[1 : MERGES + 1]
    merges = [tuple(line.split()) for line in lines]
    chars = _bytes_to_unicode()
    tokens = chars + [c + "</w>" for c in chars] + ["".join(m) for m in merges] + [BOS, EOS]
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != VOCAB_SIZE:
        raise ValueError(f"expected CLIP's {VOCAB_SIZE} tokens from {bpe_file()}, got {len(vocab)}")
    return vocab, [" ".join(m) for m in merges]


def _special(content: str) -> dict:
    return {"content": content, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}


def write_clip_tokenizer(tokenizer_dir: Path) -> Path:
    """CLIP's tokenizer folder (vocab.json, merges.txt and openai/clip-vit-large-patch14's configs)."""
    vocab, merges = clip_vocab()
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    (tokenizer_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (tokenizer_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    specials = {"bos_token": _special(BOS), "eos_token": _special(EOS), "unk_token": _special(EOS)}
    specials["pad_token"] = EOS
    (tokenizer_dir / "special_tokens_map.json").write_text(json.dumps(specials, indent=2))
    config = {
        **specials,
        "add_prefix_space": False,
        "do_lower_case": True,
        "errors": "replace",
        "model_max_length": POSITIONS,
        "name_or_path": "openai/clip-vit-large-patch14",
        "tokenizer_class": "CLIPTokenizer",
    }
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return tokenizer_dir


def write_clip_text_model(text_dir: Path, hidden: int = 32, layers: int = 2, heads: int = 2, seed: int = 0):
    """A random CLIPTextModel (CLIP's vocabulary and 77 positions, `hidden` wide) saved as safetensors."""
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        projection_dim=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        max_position_embeddings=POSITIONS,
        hidden_act="quick_gelu",  # CLIP ViT-L/14's
    )
    torch.manual_seed(seed)
    model = CLIPTextModel(config).eval()
    with torch.no_grad():  # every tensor random (the default init leaves LayerNorms at 1 and 0)
        gen = torch.Generator().manual_seed(seed)
        for name, p in model.named_parameters():
            centre = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(centre + torch.randn(p.shape, generator=gen) * 0.1)
    model.save_pretrained(str(text_dir), safe_serialization=True)
    return text_dir


def write_clip_fixture(
    text_dir: Path, tokenizer_dir: Path, hidden: int = 32, layers: int = 2, heads: int = 2, seed: int = 0
) -> tuple[Path, Path]:
    """Paris's text_encoder/ and tokenizer/ folders at a tiny width; returns (text_dir, tokenizer_dir)."""
    write_clip_text_model(Path(text_dir), hidden, layers, heads, seed)
    write_clip_tokenizer(Path(tokenizer_dir))
    return Path(text_dir), Path(tokenizer_dir)
