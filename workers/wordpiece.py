"""BERT's uncased WordPiece tokenizer in plain Python: a prompt -> token ids, as the Hugging Face fast
tokenizer (the `tokenizers` package, which sentence-transformers uses) turns it for a BertNormalizer,
BertPreTokenizer and WordPiece model, then [CLS] ... [SEP], cut to a token limit.

Rules followed, in the fast tokenizer's order:
  special tokens   [PAD] [UNK] [CLS] [SEP] [MASK] written literally in the prompt are those tokens
                   (matched in the raw text, case-sensitive, as their `normalized: false` says)
  clean text       NUL, U+FFFD and control, format, private-use and surrogate characters (Cc Cf Co
                   Cs; not tab, line feed, carriage return) are dropped, unassigned code points (Cn)
                   kept (a word holding one is [UNK]); every other White_Space character -> " "
  CJK characters   surrounded by spaces (each ideograph is its own word)
  accents          NFD, then combining marks (category Mn) dropped (uncased: strip_accents follows
                   lowercase)
  lower case       character by character (no final-sigma rule, as the fast tokenizer)
  words            split on spaces; every punctuation character (ASCII punctuation or category P*) is
                   a word of its own
  word pieces      greedy longest match from the vocabulary, continuations prefixed "##"; a word longer
                   than 100 characters, or one with no complete match, is [UNK]

The vocabulary is vocab.txt (one token a line, the line number is the id). Character classes come
from Python's unicodedata: a code point assigned after its Unicode version may be classed otherwise
than the Rust tokenizer classes it. Checked against tokenizers 0.23.3: the same ids for 3003 random
strings (accents, CJK, controls, unassigned and private-use code points, literal special tokens,
over-long words); tests/workers/test_text_encoder.py keeps some of them.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from ddm.schema.errors import ConfigError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
MAX_CHARS_PER_WORD = 100
# what the clean-text rule drops: control, format, private use, surrogate (not unassigned: Cn stays, an [UNK])
_CONTROL = frozenset(("Cc", "Cf", "Co", "Cs"))
# Unicode's White_Space property (what the fast tokenizer's char::is_whitespace reads)
_WHITE_SPACE = frozenset(
    [*map(chr, range(0x09, 0x0E)), " ", "\x85", "\xa0", "\u1680", *map(chr, range(0x2000, 0x200B))]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_punctuation(ch: str) -> bool:
    return (ch.isascii() and not ch.isalnum() and 33 <= ord(ch) <= 126) or unicodedata.category(ch)[0] == "P"


def normalize(text: str) -> str:
    """BertNormalizer (clean text, CJK spacing, accents stripped, lower case) of one stretch of text."""
    out = []
    for ch in text:
        if ch in "\t\n\r":
            out.append(" ")
        elif ch == "\x00" or ch == "\ufffd" or unicodedata.category(ch) in _CONTROL:
            continue  # dropped before the white-space rule: vertical tab and form feed go
        elif ch in _WHITE_SPACE:
            out.append(" ")
        elif _is_cjk(ord(ch)):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = unicodedata.normalize("NFD", "".join(out))
    return "".join(ch.lower() for ch in text if unicodedata.category(ch) != "Mn")


def words(text: str) -> list[str]:
    """BertPreTokenizer: split on spaces, each punctuation character a word of its own."""
    out: list[str] = []
    for chunk in text.split(" "):
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                if i > start:
                    out.append(chunk[start:i])
                out.append(ch)
                start = i + 1
        if start < len(chunk):
            out.append(chunk[start:])
    return out


class WordPiece:
    """vocab.txt's tokenizer: encode(prompt, max_tokens) -> ([CLS] ids... [SEP], truncated)."""

    def __init__(self, vocab: dict[str, int]):
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ConfigError(f"WordPiece vocabulary without the special tokens {missing}")
        self.vocab = vocab
        self.unk, self.cls, self.sep, self.pad = (vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return cls({token: i for i, token in enumerate(lines)})

    def word_ids(self, word: str) -> list[int]:
        """One word's pieces, greedy longest match first; [UNK] for the whole word when it has none."""
        if len(word) > MAX_CHARS_PER_WORD:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return ids

    def ids(self, text: str) -> list[int]:
        """The prompt's word-piece ids, without [CLS] and [SEP] and not cut."""
        out: list[int] = []
        for part in _SPECIAL_RE.split(text):
            if part in SPECIAL_TOKENS:
                out.append(self.vocab[part])
            elif part:
                for word in words(normalize(part)):
                    out.extend(self.word_ids(word))
        return out

    def encode(self, text: str, max_tokens: int) -> tuple[list[int], bool]:
        """[CLS] + the first max_tokens - 2 word pieces + [SEP], and whether any were cut."""
        if max_tokens < 2:
            raise ConfigError(f"a token limit of at least 2 ([CLS] and [SEP]), got {max_tokens}")
        pieces = self.ids(text)
        keep = max_tokens - 2
        return [self.cls, *pieces[:keep], self.sep], len(pieces) > keep
