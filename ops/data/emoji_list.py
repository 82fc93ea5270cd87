"""Which emoji the `emoji` dataset holds: Unicode's emoji-test.txt parsed, skin-tone variants folded
into their base emoji, and the held-out split decided by a hash of each base emoji.

Pure text handling (no Pillow, no font): ddm.ops.data.emoji_render draws the entries, and
ddm.ops.data.emoji_cache builds and caches the arrays.

Decisions (docs/DATA.md, "Emoji"):
- Only `fully-qualified` lines count: the minimally-qualified and unqualified lines are the same
  pictures spelled without a variation selector, and `component` lines (skin-tone and hair swatches,
  the only lines of the Component group) are building blocks, not emoji. That leaves 9 groups; the
  group is the label, the subgroup is kept beside it.
- Skin-tone variants are folded: a family is the emoji with its skin-tone modifiers (U+1F3FB-1F3FF)
  and variation selectors (U+FE0F) removed, and only its first member in file order without a
  modifier (its base, which Unicode lists before its variants) is kept. Kept, they would be about
  five sixths of People & Body and half of the whole set, all near-copies differing in one hue.
- The held-out split is a hash of the family key, so every variant of one emoji falls on the same
  side, and an emoji's side never changes when a newer emoji-test.txt adds others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import ConfigError, expected

# The 9 groups of emoji-test.txt that hold fully-qualified emoji, in file order: label i is GROUPS[i].
GROUPS = (
    "Smileys & Emotion",
    "People & Body",
    "Animals & Nature",
    "Food & Drink",
    "Travel & Places",
    "Activities",
    "Objects",
    "Symbols",
    "Flags",
)
SKIN_TONES = frozenset(range(0x1F3FB, 0x1F400))  # Fitzpatrick modifiers, light .. dark
VS16 = 0xFE0F  # emoji presentation selector
HELDOUT_FRACTION = 0.15  # share of base emoji held out (by hash; per-group counts in docs/DATA.md)
_SPLIT_SALT = b"ddm-emoji-split-v1\0"


@dataclass(frozen=True)
class EmojiEntry:
    """One fully-qualified emoji: its code points, CLDR name, group (the label) and subgroup."""

    codepoints: tuple[int, ...]
    name: str
    group: str
    subgroup: str

    @property
    def text(self) -> str:
        return "".join(map(chr, self.codepoints))

    @property
    def hex(self) -> str:
        return " ".join(f"{c:04X}" for c in self.codepoints)

    @property
    def label(self) -> int:
        return GROUPS.index(self.group)

    @property
    def has_skin_tone(self) -> bool:
        return any(c in SKIN_TONES for c in self.codepoints)

    @property
    def tone_free(self) -> str:
        """Code points without skin tones or U+FE0F, e.g. '1F44B' for 👋🏽 (1F44B 1F3FD)."""
        return " ".join(f"{c:04X}" for c in self.codepoints if c not in SKIN_TONES and c != VS16)


def parse_emoji_test(text: str, source: str = "emoji-test.txt") -> list[EmojiEntry]:
    """The fully-qualified entries of an emoji-test.txt, in file order.

    A line reads `1F44B 1F3FD ; fully-qualified # 👋🏽 E1.0 waving hand: medium skin tone`. A
    fully-qualified emoji in a group outside GROUPS is refused (a newer file with a new group must
    be looked at, not silently labelled).
    """
    entries: list[EmojiEntry] = []
    group = subgroup = ""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("# group:"):
            group, subgroup = line.removeprefix("# group:").strip(), ""
            continue
        if line.startswith("# subgroup:"):
            subgroup = line.removeprefix("# subgroup:").strip()
            continue
        if not line or line.startswith("#"):
            continue
        fields, _, comment = line.partition("#")
        points, sep, status = fields.partition(";")
        if not sep:
            raise ConfigError(f"{source}:{lineno}: {expected('`code points ; status # name`', raw)}")
        if status.strip() != "fully-qualified":
            continue
        if group not in GROUPS:
            raise ConfigError(f"{source}:{lineno}: {expected(f'a group in {list(GROUPS)}', group)}")
        try:
            codepoints = tuple(int(p, 16) for p in points.split())
        except ValueError as exc:
            raise ConfigError(f"{source}:{lineno}: {expected('hex code points', points.strip())}") from exc
        if not codepoints:
            raise ConfigError(f"{source}:{lineno}: {expected('at least one code point', raw)}")
        # the comment is "<emoji> E<version> <name>"
        words = comment.split()
        name = " ".join(words[2:]) if len(words) > 2 else comment.strip()
        entries.append(EmojiEntry(codepoints, name, group, subgroup))
    if not entries:
        raise ConfigError(f"{source}: {expected('fully-qualified emoji lines', 'none')}")
    return entries


def read_emoji_test(path: str | Path) -> list[EmojiEntry]:
    path = Path(path)
    return parse_emoji_test(path.read_text(encoding="utf-8"), str(path))


def families(entries: list[EmojiEntry]) -> list[str]:
    """The family key of each entry: the `tone_free` key of the emoji without a skin tone it varies.

    Usually that is its own `tone_free` key (👋🏽 -> 👋). A few mixed-tone forms are spelled with other
    code points than their base (🫱🏻‍🫲🏼 for 🤝, 🧑🏻‍❤️‍💋‍🧑🏼 for 💏): no emoji without a tone has
    their key, and they belong to the nearest emoji without a tone before them, which is how
    emoji-test.txt orders every base and its variants.
    """
    plain = {e.tone_free for e in entries if not e.has_skin_tone}
    out: list[str] = []
    base = None
    for e in entries:
        key = e.tone_free
        if not e.has_skin_tone:
            base = key
        elif key not in plain and base is not None:
            key = base
        out.append(key)
    return out


def fold_skin_tones(entries: list[EmojiEntry]) -> tuple[list[EmojiEntry], list[str], int]:
    """(one entry per family, their family keys, how many skin-tone variants were folded away).

    The kept entry is the family's first member without a skin tone (a family with none keeps its
    first member; Unicode 15.0 has none such).
    """
    keys = families(entries)
    chosen: dict[str, int] = {}
    for i, (e, key) in enumerate(zip(entries, keys, strict=True)):
        have = chosen.get(key)
        if have is None or (entries[have].has_skin_tone and not e.has_skin_tone):
            chosen[key] = i
    kept = sorted(chosen.values())
    return [entries[i] for i in kept], [keys[i] for i in kept], len(entries) - len(kept)


def is_heldout(family: str, fraction: float = HELDOUT_FRACTION) -> bool:
    """True when the family falls in the held-out split: sha256(salt, key) read as a fraction < fraction."""
    digest = hashlib.sha256(_SPLIT_SALT + family.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction
