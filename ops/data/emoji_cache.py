"""The `emoji` dataset on disk: found sources (two Debian packages), rendered once into
<data dir>/emoji/emoji-<size>.npz with a JSON beside it, and loaded back checked.

The JSON records what was rendered and from what: the sha256 of the arrays, of the font file and
of emoji-test.txt, the Pillow, raqm and FreeType versions, the size and background; `checksum` is
the sha256 of all of that, so two machines that print the same checksum trained on the same pixels.
Rendering again (`ddm data fetch emoji --force`) compares its result with the checksum it replaces.
The rendered images live only under the data directory, never in the repository.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.ops.data.emoji_list import GROUPS, HELDOUT_FRACTION, fold_skin_tones, is_heldout, read_emoji_test
from ddm.ops.data.emoji_render import BACKGROUND, SIZES, open_font, render
from ddm.schema.atomic import atomic_path, write_text_atomic
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.errors import ConfigError, expected

# Debian package -> where it puts the file the dataset is built from.
FONT_PACKAGE, UNICODE_PACKAGE = "fonts-noto-color-emoji", "unicode-data"
SOURCE_FILES = {
    FONT_PACKAGE: Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"),
    UNICODE_PACKAGE: Path("/usr/share/unicode/emoji/emoji-test.txt"),
}
APT_INSTALL = f"apt-get install -y {FONT_PACKAGE} {UNICODE_PACKAGE}"
FORMAT = "ddm-emoji-v1"
_ARRAYS = ("images", "labels", "heldout", "codepoints", "names", "subgroups", "families")


def missing_packages() -> list[str]:
    """The source packages whose file is absent here."""
    return [pkg for pkg, path in SOURCE_FILES.items() if not path.is_file()]


def require_sources() -> tuple[Path, Path]:
    """(font path, emoji-test.txt path), or a ConfigError naming the missing packages and the fix."""
    missing = missing_packages()
    if missing:
        files = ", ".join(str(SOURCE_FILES[p]) for p in missing)
        raise ConfigError(
            f"the emoji dataset is rendered from Debian packages; missing {', '.join(missing)} ({files}): "
            f"`{APT_INSTALL}`"
        )
    return SOURCE_FILES[FONT_PACKAGE], SOURCE_FILES[UNICODE_PACKAGE]


def cache_paths(data_dir: Path, size: int) -> tuple[Path, Path]:
    """(<data dir>/emoji/emoji-<size>.npz, the .json beside it)."""
    folder = Path(data_dir) / "emoji"
    return folder / f"emoji-{size}.npz", folder / f"emoji-{size}.json"


def renderer_versions() -> dict[str, str]:
    import PIL
    from PIL import features

    return {
        "pillow": PIL.__version__,
        "raqm": str(features.version("raqm")),
        "freetype2": str(features.version("freetype2")),
    }


def arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    """sha256 of the rendered content: image bytes, labels, split flags and which emoji, in order."""
    h = hashlib.sha256()
    h.update(FORMAT.encode() + b"\0" + str(arrays["images"].shape).encode() + b"\0")
    h.update(np.ascontiguousarray(arrays["images"], dtype=np.uint8).tobytes())
    h.update(np.asarray(arrays["labels"], dtype="<i8").tobytes())
    h.update(np.asarray(arrays["heldout"], dtype=np.uint8).tobytes())
    h.update("\n".join(arrays["codepoints"].tolist()).encode())
    return h.hexdigest()


def checksum(meta: dict) -> str:
    """sha256 over the arrays' sha256, the sources' sha256, the renderer versions and the settings."""
    keys = ("format", "size", "background", "heldout_fraction", "arrays_sha256", "sources", "renderer")
    blob = json.dumps({k: meta[k] for k in keys}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class Rendered:
    arrays: dict[str, np.ndarray]  # images uint8 [N, 3, S, S], labels int64 [N], heldout bool [N], str [N] x4
    meta: dict


def render_all(size: int, *, progress: bool = True, select: slice | None = None) -> Rendered:
    """Render every base emoji of the installed emoji-test.txt (only entries[select], for tests)."""
    from tqdm import tqdm

    if size not in SIZES:
        raise ConfigError(expected(f"an emoji size in {SIZES}", size))
    font_path, test_path = require_sources()
    entries, families, folded = fold_skin_tones(read_emoji_test(test_path))
    if select is not None:
        entries, families = entries[select], families[select]
    font = open_font(font_path)
    images, kept, dropped = [], [], []
    for i, e in enumerate(
        tqdm(entries, desc=f"render emoji {size}x{size}", unit="emoji", disable=not progress, file=sys.stderr)
    ):
        img, why = render(font, e.text, size)
        if img is None:
            dropped.append(f"{e.hex} {e.name} ({why})")
            continue
        images.append(img)
        kept.append(i)
    if not images:
        raise ConfigError(f"{font_path}: {expected('emoji the font can draw', 'none drawn')}")
    pick = [entries[i] for i in kept]
    arrays = {
        "images": np.stack(images),
        "labels": np.array([e.label for e in pick], dtype=np.int64),
        "heldout": np.array([is_heldout(families[i]) for i in kept], dtype=bool),
        "codepoints": np.array([e.hex for e in pick]),
        "names": np.array([e.name for e in pick]),
        "subgroups": np.array([e.subgroup for e in pick]),
        "families": np.array([families[i] for i in kept]),
    }
    meta = {
        "format": FORMAT,
        "size": size,
        "background": list(BACKGROUND),
        "heldout_fraction": HELDOUT_FRACTION,
        "classes": list(GROUPS),
        "count": len(pick),
        "skin_tone_variants_folded": folded,
        "dropped": dropped,
        "arrays_sha256": arrays_sha256(arrays),
        "sources": {
            pkg: {"path": str(p), "sha256": file_sha256(p)}
            for pkg, p in ((FONT_PACKAGE, font_path), (UNICODE_PACKAGE, test_path))
        },
        "renderer": renderer_versions(),
    }
    meta["checksum"] = checksum(meta)
    return Rendered(arrays, meta)


def write_cache(data_dir: Path, rendered: Rendered) -> Path:
    """The arrays to <data dir>/emoji/emoji-<size>.npz, then their JSON (each written atomically)."""
    npz_path, meta_path = cache_paths(data_dir, rendered.meta["size"])
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(npz_path) as tmp:
        np.savez(tmp, **rendered.arrays)
    write_text_atomic(meta_path, json.dumps(rendered.meta, indent=1) + "\n")
    return npz_path


def read_meta(data_dir: Path, size: int) -> dict | None:
    _, meta_path = cache_paths(data_dir, size)
    try:
        meta = json.loads(meta_path.read_text())
        return meta if isinstance(meta, dict) else None
    except (OSError, ValueError):
        return None


def _sources_match(meta: dict) -> bool:
    """True when the installed sources and renderer are the ones the cache was rendered from."""
    if missing_packages():
        return True  # nothing here to compare with: the cache stands on its own checksum
    want = meta.get("sources", {})
    return meta.get("renderer") == renderer_versions() and all(
        want.get(pkg, {}).get("sha256") == file_sha256(path) for pkg, path in SOURCE_FILES.items()
    )


_REDO = "; the cache is corrupt or of an older format: `ddm data fetch emoji --force` renders it again"


def _read_arrays(npz_path: Path) -> dict[str, np.ndarray]:
    """The cache's arrays (never unpickled); ConfigError when the file is not an npz of exactly them
    (truncated, garbage, an older format), so ensure_cache renders it again."""
    try:
        with np.load(npz_path, allow_pickle=False) as z:
            found = set(z.files)
            arrays = {k: z[k] for k in _ARRAYS} if found == set(_ARRAYS) else None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        # not numpy's own text: for a file it cannot read it suggests allow_pickle, which is never the fix
        got = f"an unreadable file ({type(exc).__name__})"
        raise ConfigError(f"{npz_path}: {expected('an npz of the emoji arrays', got)}{_REDO}") from exc
    if arrays is None:
        raise ConfigError(f"{npz_path}: {expected(f'the arrays {sorted(_ARRAYS)}', sorted(found))}{_REDO}")
    return arrays


def load_cache(data_dir: Path, size: int) -> Rendered:
    """The cached arrays, checked against their JSON; ConfigError when missing, corrupt or stale."""
    npz_path, meta_path = cache_paths(data_dir, size)
    meta = read_meta(data_dir, size)
    if meta is None or not npz_path.is_file():
        raise ConfigError(f"{npz_path} (and {meta_path.name}) not found: `ddm data fetch emoji` renders it")
    arrays = _read_arrays(npz_path)
    try:
        got, meta_sum = arrays_sha256(arrays), checksum(meta)
    except (KeyError, TypeError, ValueError, IndexError) as exc:  # arrays or a JSON of another format
        what = f"arrays or a {meta_path.name} of another kind ({type(exc).__name__}: {exc})"
        raise ConfigError(f"{npz_path}: {what}{_REDO}") from exc
    if got != meta.get("arrays_sha256") or meta_sum != meta.get("checksum"):
        raise ConfigError(
            f"{npz_path}: "
            + expected(f"arrays sha256 {meta.get('arrays_sha256')} and a matching checksum", got)
            + "; the cache is corrupt: `ddm data fetch emoji --force` renders it again"
        )
    if not _sources_match(meta):
        raise ConfigError(
            f"{npz_path} was rendered from another font, emoji-test.txt or Pillow than the ones installed "
            "here: `ddm data fetch emoji --force` renders it again (and prints the new checksum)"
        )
    return Rendered(arrays, meta)


def ensure_cache(
    data_dir: Path, size: int, *, force: bool = False, progress: bool = True
) -> tuple[Rendered, str]:
    """(the dataset, what happened): a valid cache is reused; otherwise render and write it.

    With force, render again even when valid and say whether the checksum came out the same.
    """
    previous = read_meta(data_dir, size)
    if not force:
        try:
            return load_cache(data_dir, size), "present and valid"
        except ConfigError:
            pass
    rendered = render_all(size, progress=progress)
    write_cache(data_dir, rendered)
    new = rendered.meta["checksum"]
    if previous is None:
        note = "rendered"
    elif previous.get("checksum") == new:
        note = "rendered again: same checksum as the cache it replaced"
    else:
        note = f"rendered again: checksum differs from the cache it replaced ({previous.get('checksum')})"
    return rendered, note
