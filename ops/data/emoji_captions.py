"""Text captions for the `emoji` dataset, offline: Unicode CLDR's English annotations (Debian package
unicode-cldr-core) read with the standard library, and per-image captions next to the labels.

CLDR's `annotations/en.xml` gives each emoji a name (`type="tts"`, "red apple") and keywords
("apple | fruit | red"); `annotationsDerived/en.xml` adds sequences built from others (skin tones,
keycaps, flags, most ZWJ sequences). Both key emoji with every U+FE0F removed, so a lookup removes
it too. The files are local but read as untrusted input: bounded size, no entity declarations, the
expected elements only, and every refusal names the file and what was expected (docs/DATA.md,
"Captions").

The caption of an image is its tts name. Its variants are the name and then keyword subsets, drawn
by a generator seeded with (seed, the emoji's key) only, so an emoji's variants never depend on which
other emoji are in the set: each variant is 1 to 3 distinct keywords in random order, joined by ", "
or by " " (a coin flip), repeats skipped.
"""

from __future__ import annotations

import hashlib
import random
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import ConfigError, expected

CLDR_PACKAGE = "unicode-cldr-core"
CLDR_DIR = Path("/usr/share/unicode/cldr/common")
ANNOTATIONS = CLDR_DIR / "annotations" / "en.xml"  # required
ANNOTATIONS_DERIVED = CLDR_DIR / "annotationsDerived" / "en.xml"  # used when present
CAPTIONS_APT = f"apt-get install -y {CLDR_PACKAGE}"
VS16 = "\ufe0f"

MAX_BYTES = 16 << 20  # en.xml is 0.25 MB, the derived one 0.4 MB (CLDR 41)
MAX_ANNOTATIONS = 100_000  # 3,823 + 4,204 elements in CLDR 41
MAX_CP_CHARS = 64  # the longest emoji sequence (a kiss with two skin tones) is 10 code points
MAX_TEXT_CHARS = 1_000
MAX_KEYWORDS = 3  # per variant
DEFAULT_VARIANTS = 5  # the name and up to 4 keyword subsets
_DECLARATION = re.compile(rb"<!(ENTITY|ELEMENT|ATTLIST)", re.I)
_VARIANT_SALT = "ddm-emoji-caption-v1"


@dataclass(frozen=True)
class Annotation:
    """One emoji's CLDR annotation: its name (tts; None when the file gives only keywords) and keywords."""

    name: str | None
    keywords: tuple[str, ...]


def annotation_key(text: str) -> str:
    """How CLDR keys an emoji: its characters without U+FE0F ('❤️' and '❤' are both '❤')."""
    return text.replace(VS16, "")


def _refuse(source: str, what: str, got: object, where: str = "") -> ConfigError:
    return ConfigError(f"{source}{where}: {expected(what, got)}")


def _read_bounded(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the CLDR annotations ({exc}): `{CAPTIONS_APT}`") from exc
    if len(data) > MAX_BYTES:
        raise _refuse(str(path), f"a CLDR annotations file of at most {MAX_BYTES} bytes", "a larger file")
    return data


def _parse_root(data: bytes, source: str) -> ET.Element:
    """The <ldml> root; no DTD declarations (entities could expand without bound), well-formed XML."""
    if len(data) > MAX_BYTES:
        raise _refuse(source, f"at most {MAX_BYTES} bytes", f"{len(data)} bytes")
    found = _DECLARATION.search(data)
    if found is not None:
        what = "CLDR annotations XML without DTD declarations"
        raise _refuse(source, what, f"<!{found.group(1).decode()}")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        line, col = exc.position
        raise _refuse(source, "well-formed XML (CLDR annotations)", str(exc), f":{line}:{col}") from exc
    if root.tag != "ldml":
        raise _refuse(source, "an <ldml> root element (CLDR annotations)", f"<{root.tag}>")
    return root


def _text(el: ET.Element, source: str, cp: str) -> str:
    text = (el.text or "").strip()
    if not text or len(text) > MAX_TEXT_CHARS:
        raise _refuse(source, f"annotation text of 1 to {MAX_TEXT_CHARS} characters for cp={cp!r}", text)
    return text


def parse_annotations(data: bytes, source: str = "en.xml") -> dict[str, Annotation]:
    """{emoji key (no U+FE0F): Annotation} of one CLDR annotations file; ConfigError naming `source`
    when it is not one (malformed XML, another root, no <annotations>, an element without cp, an empty
    or oversized text, a type other than tts, a key given twice, no annotation at all)."""
    root = _parse_root(data, source)
    block = root.find("annotations")
    if block is None:
        raise _refuse(source, "an <annotations> element under <ldml>", [c.tag for c in root][:10])
    names: dict[str, str] = {}
    keywords: dict[str, tuple[str, ...]] = {}
    for i, el in enumerate(block):
        if i >= MAX_ANNOTATIONS:
            raise _refuse(source, f"at most {MAX_ANNOTATIONS} annotations", "more")
        if el.tag != "annotation":
            raise _refuse(source, "only <annotation> elements in <annotations>", f"<{el.tag}>")
        cp = el.get("cp", "")
        if not cp or len(cp) > MAX_CP_CHARS:
            raise _refuse(source, f"a cp attribute of 1 to {MAX_CP_CHARS} characters", cp)
        key, kind, text = annotation_key(cp), el.get("type"), _text(el, source, cp)
        if kind not in (None, "tts"):
            raise _refuse(source, f"type absent or 'tts' for cp={cp!r}", kind)
        table = names if kind == "tts" else keywords
        if key in table:
            raise _refuse(source, f"one {'name' if kind else 'keyword list'} per emoji", f"cp={cp!r} twice")
        if kind == "tts":
            names[key] = text
        else:
            keywords[key] = tuple(dict.fromkeys(w.strip() for w in text.split("|") if w.strip()))
    if not names and not keywords:
        raise _refuse(source, "at least one <annotation>", "none")
    return {k: Annotation(names.get(k), keywords.get(k, ())) for k in {**names, **keywords}}


def read_annotations(path: str | Path) -> dict[str, Annotation]:
    path = Path(path)
    return parse_annotations(_read_bounded(path), str(path))


def annotations_sha256(path: Path) -> str:
    return hashlib.sha256(_read_bounded(path)).hexdigest()


def caption_sources() -> list[Path]:
    """The annotation files used here: en.xml (ConfigError naming the package when missing), then the
    derived en.xml when the package has it."""
    if not ANNOTATIONS.is_file():
        raise ConfigError(
            f"emoji captions are read from CLDR's English annotations; missing {ANNOTATIONS} "
            f"(package {CLDR_PACKAGE}): `{CAPTIONS_APT}`"
        )
    return [ANNOTATIONS] + ([ANNOTATIONS_DERIVED] if ANNOTATIONS_DERIVED.is_file() else [])


def merge(tables: list[dict[str, Annotation]]) -> dict[str, Annotation]:
    """One table: for each key the first table's name and keywords, an empty field filled from later ones."""
    out: dict[str, Annotation] = {}
    for table in tables:
        for key, a in table.items():
            have = out.get(key)
            if have is None:
                out[key] = a
            else:
                out[key] = Annotation(have.name or a.name, have.keywords or a.keywords)
    return out


def load_annotations(paths: list[Path] | None = None) -> dict[str, Annotation]:
    """The merged annotations of `paths` (default: caption_sources(), en.xml first)."""
    return merge([read_annotations(p) for p in (paths if paths is not None else caption_sources())])


def variants(
    annotation: Annotation, key: str, seed: int = 0, count: int = DEFAULT_VARIANTS
) -> tuple[str, ...]:
    """Up to `count` captions: the name first (when there is one), then keyword subsets (the rule in
    the module's docstring), a pure function of (annotation, key, seed, count)."""
    out = [annotation.name] if annotation.name else []
    words = sorted(annotation.keywords)
    rng = random.Random(f"{_VARIANT_SALT}\0{seed}\0{key}")  # str seeds hash with sha512: stable
    for _ in range(4 * count):  # bounded: few keywords allow few distinct subsets
        if len(out) >= count or not words:
            break
        picked = rng.sample(words, rng.randint(1, min(MAX_KEYWORDS, len(words))))
        text = (", " if rng.random() < 0.5 else " ").join(picked)
        if text not in out:
            out.append(text)
    return tuple(out)


def hex_to_text(hex_codepoints: str) -> str:
    """'263A FE0F' (the dataset's codepoints column) -> '☺️'."""
    return "".join(chr(int(p, 16)) for p in hex_codepoints.split())


@dataclass(frozen=True)
class EmojiCaptions:
    """Per-image captions of one split, row i for image i of load_dataset(name, split): its code points,
    its caption (the CLDR name; None when CLDR has none) and its variants (empty when none)."""

    codepoints: tuple[str, ...]
    captions: tuple[str | None, ...]
    variants: tuple[tuple[str, ...], ...]
    sources: dict[str, str]  # annotation file -> sha256

    def __len__(self) -> int:
        return len(self.codepoints)

    @property
    def covered(self) -> int:
        """How many images have a caption."""
        return sum(c is not None for c in self.captions)


def caption_rows(
    codepoints: list[str], table: dict[str, Annotation], *, seed: int = 0, count: int = DEFAULT_VARIANTS
) -> tuple[tuple[str | None, ...], tuple[tuple[str, ...], ...]]:
    """(captions, variants) for hex code point strings, looked up without U+FE0F."""
    captions, all_variants = [], []
    for hx in codepoints:
        key = annotation_key(hex_to_text(hx))
        a = table.get(key)
        captions.append(a.name if a is not None else None)
        all_variants.append(variants(a, key, seed, count) if a is not None else ())
    return tuple(captions), tuple(all_variants)


def load_captions(
    name: str,
    split_spec: str,
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    count: int = DEFAULT_VARIANTS,
) -> EmojiCaptions:
    """The captions of load_dataset(name, split_spec) (emoji, emoji-64, a latent dataset of them),
    aligned row by row with its images and labels; the dataset itself is unchanged (captions are not
    part of its cache or sha256)."""
    from ddm.ops.data.dataset import rendered_rows
    from ddm.schema.autoencoder_card import split_latent_name

    paths = caption_sources()
    table = load_annotations(paths)
    latent = split_latent_name(name)  # a latent dataset's rows are its source split's, one for one
    rendered, rows = rendered_rows(latent[0] if latent else name, split_spec, data_dir)
    hexes = rendered.arrays["codepoints"][rows].tolist()
    captions, all_variants = caption_rows(hexes, table, seed=seed, count=count)
    return EmojiCaptions(tuple(hexes), captions, all_variants, {str(p): annotations_sha256(p) for p in paths})
