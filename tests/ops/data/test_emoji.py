"""The emoji dataset: parsing emoji-test.txt, folding skin tones, the held-out split, rendering, the cache
and its checksum, the doctor check and `ddm data` on it.

Parsing and the split run everywhere (an inline sample). Rendering needs the two Debian packages
(fonts-noto-color-emoji, unicode-data; CI installs them) and skips with that reason where they are
absent. Tests render a few dozen emoji, not the whole set.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddm.ops.data import emoji_cache
from ddm.ops.data.emoji_cache import (
    APT_INSTALL,
    arrays_sha256,
    checksum,
    ensure_cache,
    load_cache,
    missing_packages,
    render_all,
    write_cache,
)
from ddm.ops.data.emoji_list import GROUPS, families, fold_skin_tones, is_heldout, parse_emoji_test
from ddm.schema.errors import ConfigError

SAMPLE = """\
# emoji-test.txt (a trimmed sample; the real file aligns its columns)
# group: Smileys & Emotion

# subgroup: face-smiling
1F600 ; fully-qualified # 😀 E1.0 grinning face
263A FE0F ; fully-qualified # ☺️ E0.6 smiling face
263A ; unqualified # ☺ E0.6 smiling face

# group: People & Body

# subgroup: hand-fingers-open
1F44B ; fully-qualified # 👋 E0.6 waving hand
1F44B 1F3FB ; fully-qualified # 👋🏻 E1.0 waving hand: light skin tone
1F44B 1F3FF ; fully-qualified # 👋🏿 E1.0 waving hand: dark skin tone

# subgroup: hands
1F91D ; fully-qualified # 🤝 E3.0 handshake
1F91D 1F3FB ; fully-qualified # 🤝🏻 E3.0 handshake: light skin tone
1FAF1 1F3FB 200D 1FAF2 1F3FC ; fully-qualified # 🫱🏻‍🫲🏼 E14.0 handshake: light, medium-light

# subgroup: person-role
1F575 FE0F 200D 2642 FE0F ; fully-qualified # 🕵️‍♂️ E4.0 man detective
1F575 200D 2642 FE0F ; unqualified # 🕵‍♂️ E4.0 man detective
1F575 1F3FD 200D 2642 FE0F ; fully-qualified # 🕵🏽‍♂️ E4.0 man detective: medium skin tone

# group: Component

# subgroup: skin-tone
1F3FB ; component # 🏻 E1.0 light skin tone

# group: Flags

# subgroup: country-flag
1F1FA 1F1F8 ; fully-qualified # 🇺🇸 E2.0 flag: United States
"""


def sample_entries():
    return parse_emoji_test(SAMPLE)


def needs_sources() -> None:
    missing = missing_packages()
    if missing:
        pytest.skip(f"the emoji sources are not installed ({', '.join(missing)}): `{APT_INSTALL}`")


# --- parsing -----------------------------------------------------------------------------------


def test_parse_keeps_fully_qualified_lines_with_group_label_and_subgroup():
    entries = sample_entries()
    assert [e.hex for e in entries] == [
        "1F600",
        "263A FE0F",
        "1F44B",
        "1F44B 1F3FB",
        "1F44B 1F3FF",
        "1F91D",
        "1F91D 1F3FB",
        "1FAF1 1F3FB 200D 1FAF2 1F3FC",
        "1F575 FE0F 200D 2642 FE0F",
        "1F575 1F3FD 200D 2642 FE0F",
        "1F1FA 1F1F8",
    ]
    first, wave, flag = entries[0], entries[2], entries[-1]
    assert (first.name, first.group, first.subgroup, first.label) == (
        "grinning face",
        "Smileys & Emotion",
        "face-smiling",
        0,
    )
    assert (wave.label, wave.subgroup, wave.text) == (1, "hand-fingers-open", "\U0001f44b")
    assert (flag.name, flag.label) == ("flag: United States", GROUPS.index("Flags"))
    assert entries[3].has_skin_tone and not entries[2].has_skin_tone


def test_parse_refuses_an_unknown_group_and_a_malformed_line():
    with pytest.raises(ConfigError, match="a group in"):
        parse_emoji_test("# group: Aliens\n1F47D ; fully-qualified # 👽 E0.6 alien\n")
    with pytest.raises(ConfigError, match=r"x\.txt:2: .*code points ; status"):
        parse_emoji_test("# group: Objects\n1F47D fully-qualified\n", "x.txt")
    with pytest.raises(ConfigError, match="fully-qualified emoji lines"):
        parse_emoji_test("# nothing here\n")


# --- skin tones and the split --------------------------------------------------------------------


def test_skin_tone_variants_join_their_base_family_even_when_spelled_otherwise():
    entries = sample_entries()
    keys = families(entries)
    by_hex = dict(zip((e.hex for e in entries), keys, strict=True))
    assert by_hex["1F44B 1F3FB"] == by_hex["1F44B 1F3FF"] == by_hex["1F44B"] == "1F44B"
    # the mixed-tone handshake uses other code points; it belongs to the 🤝 before it
    assert by_hex["1FAF1 1F3FB 200D 1FAF2 1F3FC"] == by_hex["1F91D"] == "1F91D"
    # variation selectors do not split a family
    assert by_hex["1F575 1F3FD 200D 2642 FE0F"] == by_hex["1F575 FE0F 200D 2642 FE0F"]


def test_folding_keeps_one_base_emoji_per_family():
    kept, keys, folded = fold_skin_tones(sample_entries())
    assert [e.hex for e in kept] == [
        "1F600",
        "263A FE0F",
        "1F44B",
        "1F91D",
        "1F575 FE0F 200D 2642 FE0F",
        "1F1FA 1F1F8",
    ]
    assert folded == 5 and not any(e.has_skin_tone for e in kept)
    assert keys == [e.tone_free for e in kept]


def test_heldout_split_is_deterministic_stable_and_near_its_fraction():
    keys = [f"{0x1F000 + i:04X}" for i in range(20000)]
    first = [is_heldout(k) for k in keys]
    assert first == [is_heldout(k) for k in keys]  # no hidden state, no seed
    assert abs(np.mean(first) - 0.15) < 0.01
    # pinned: changing the salt or the hash would silently move emoji between train and test
    pinned = {
        "1F600": False,
        "1F44B": False,
        "1F1FA 1F1F8": False,
        "1F300": True,
        "1F309": True,
        "1F30A": False,
    }
    assert {k: is_heldout(k) for k in pinned} == pinned
    # a family's side depends on its key only, so every variant of one emoji falls on the same side
    entries = sample_entries()
    sides = {}
    for key in families(entries):
        sides.setdefault(key, set()).add(is_heldout(key))
    assert all(len(s) == 1 for s in sides.values())


# --- rendering, the cache and its checksum --------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    """Every 60th base emoji (about 31, spread over the groups), rendered at 32x32."""
    needs_sources()
    return render_all(32, progress=False, select=slice(None, None, 60))


def test_rendering_gives_rgb_arrays_on_the_grey_background_and_not_blank(small):
    images, labels = small.arrays["images"], small.arrays["labels"]
    assert images.dtype == np.uint8 and images.shape == (len(labels), 3, 32, 32) and len(labels) > 25
    assert set(labels.tolist()) == set(range(len(GROUPS)))  # every group drawn
    assert (images[:, :, 0, 0] == 128).all()  # corners are the background
    per_image_std = images.reshape(len(images), -1).std(axis=1)
    assert (per_image_std > 10).all()  # something was drawn on every one
    colourful = np.abs(images[:, 0].astype(int) - images[:, 2].astype(int)).max(axis=(1, 2))
    assert (colourful > 60).mean() > 0.8  # colour bitmaps, not grey outlines
    assert small.meta["dropped"] == []
    assert small.arrays["heldout"].any() and not small.arrays["heldout"].all()


def test_64_pixel_option_and_a_glyph_the_font_lacks_is_dropped():
    needs_sources()
    from ddm.ops.data.emoji_cache import require_sources
    from ddm.ops.data.emoji_render import open_font, render

    font = open_font(require_sources()[0])
    img, why = render(font, "\U0001f600", 64)
    assert why is None and img.shape == (3, 64, 64) and img.dtype == np.uint8
    assert render(font, "A", 32) == (None, "blank")  # not in the font: .notdef draws nothing
    assert render(font, "\U0001f600\U0001f600", 32) == (None, "not one glyph")


def test_checksum_changes_with_the_pixels_and_with_the_sources(small):
    meta, arrays = small.meta, small.arrays
    assert checksum(meta) == meta["checksum"] and arrays_sha256(arrays) == meta["arrays_sha256"]
    touched = dict(arrays, images=arrays["images"].copy())
    touched["images"][0, 0, 5, 5] ^= 1
    assert arrays_sha256(touched) != meta["arrays_sha256"]
    other_font = {**meta, "sources": {**meta["sources"], "fonts-noto-color-emoji": {"sha256": "0" * 64}}}
    other_pillow = {**meta, "renderer": {**meta["renderer"], "pillow": "0.0"}}
    assert len({checksum(meta), checksum(other_font), checksum(other_pillow)}) == 3
    again = render_all(32, progress=False, select=slice(None, None, 60))
    assert again.meta["checksum"] == meta["checksum"]  # rendering is deterministic


def test_cache_round_trip_refuses_corruption_and_loads_as_a_dataset(small, tmp_path):
    from ddm.ops.data.dataset import load_dataset

    path = write_cache(tmp_path, small)
    assert path == tmp_path / "emoji" / "emoji-32.npz"
    assert load_cache(tmp_path, 32).meta["checksum"] == small.meta["checksum"]

    train, test = load_dataset("emoji", "train", tmp_path), load_dataset("emoji", "test", tmp_path)
    held = small.arrays["heldout"]
    assert (len(train), len(test)) == (int((~held).sum()), int(held.sum()))
    assert train.classes == GROUPS and train.label_counts().shape == (9,)
    x = train.as_model_input()
    assert x.shape == (len(train), 3, 32, 32) and x.dtype == np.float32
    assert x.min() >= -1.0 and x.max() <= 1.0 and x.max() > 0.9
    assert load_dataset("emoji", "train[:3]", tmp_path).images.shape == (3, 3, 32, 32)

    bad = dict(small.arrays, images=small.arrays["images"].copy())
    bad["images"][0, 0, 0, 0] ^= 1
    np.savez(path, **bad)
    with pytest.raises(ConfigError, match="cache is corrupt"):
        load_cache(tmp_path, 32)


def test_missing_cache_and_stale_sources_are_named(small, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="ddm data fetch emoji"):
        load_cache(tmp_path, 32)
    write_cache(tmp_path, small)
    monkeypatch.setattr(emoji_cache, "renderer_versions", lambda: {"pillow": "0.0"})
    with pytest.raises(ConfigError, match="another font, emoji-test.txt or Pillow"):
        load_cache(tmp_path, 32)


# --- without the packages ---------------------------------------------------------------------


def test_missing_packages_are_named_with_the_apt_line(tmp_path, monkeypatch):
    from ddm.ops.doctor.emoji import emoji_sources

    monkeypatch.setattr(
        emoji_cache,
        "SOURCE_FILES",
        {"fonts-noto-color-emoji": tmp_path / "no.ttf", "unicode-data": tmp_path / "no.txt"},
    )
    with pytest.raises(ConfigError, match="fonts-noto-color-emoji, unicode-data.*apt-get install -y"):
        render_all(32, progress=False)
    check = emoji_sources()
    assert check.status == "skip" and "fonts-noto-color-emoji, unicode-data" in check.detail
    assert check.fix == "apt-get install -y fonts-noto-color-emoji unicode-data"


def test_doctor_says_ok_where_the_packages_are():
    needs_sources()
    from ddm.ops.doctor.emoji import emoji_sources

    check = emoji_sources()
    assert check.status == "ok" and "NotoColorEmoji.ttf" in check.detail and "emoji-test.txt" in check.detail


# --- the CLI ------------------------------------------------------------------------------------


def test_ddm_data_info_and_preview_print_the_checksum_and_draw_a_grid(small, tmp_path, capsys):
    from PIL import Image

    from ddm.ops.cli import main

    write_cache(tmp_path, small)
    assert main(["data", "info", "emoji", "--split", "test", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"checksum {small.meta['checksum']}" in out and "Flags" in out and "3x32x32" in out
    png = tmp_path / "grid.png"
    assert (
        main(["data", "preview", "emoji", "--data-dir", str(tmp_path), "--per-class", "4", "--out", str(png)])
        == 0
    )
    assert Image.open(png).mode == "RGB" and Image.open(png).size == (4 * 34 + 2, 9 * 34 + 2)
    assert main(["data", "fetch", "emoji", "--data-dir", str(tmp_path)]) == 0  # the small cache is valid
    assert "present and valid" in capsys.readouterr().out


# --- a cache that is not what it should be (no sources needed) ------------------------------------


def _tiny(size: int = 32) -> emoji_cache.Rendered:
    """Three flat emoji-shaped records with a consistent JSON, as render_all would write them."""
    arrays = {
        "images": np.full((3, 3, size, size), 128, np.uint8),
        "labels": np.arange(3, dtype=np.int64),
        "heldout": np.array([False, True, False]),
        "codepoints": np.array(["1F600", "1F601", "1F602"]),
        "names": np.array(["a", "b", "c"]),
        "subgroups": np.array(["s", "s", "s"]),
        "families": np.array(["a", "b", "c"]),
    }
    meta = {
        "format": emoji_cache.FORMAT,
        "size": size,
        "background": [128, 128, 128],
        "heldout_fraction": 0.1,
        "arrays_sha256": arrays_sha256(arrays),
        "sources": {},
        "renderer": {},
    }
    meta["checksum"] = checksum(meta)
    return emoji_cache.Rendered(arrays, meta)


def _garbage(path):
    path.write_bytes(b"\x93NUMPY not really" * 10)


def _truncated(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _missing_key(path):
    arrays = dict(_tiny().arrays)
    del arrays["families"]
    np.savez(path, **arrays)


def _old_format(path):  # object arrays: numpy would need pickle to read them
    np.savez(path, **dict(_tiny().arrays, names=np.array(["a", None, "c"], dtype=object)))


def _other_dtype(path):  # every key there, but codepoints are numbers
    np.savez(path, **dict(_tiny().arrays, codepoints=np.arange(3)))


@pytest.mark.parametrize("spoil", [_garbage, _truncated, _missing_key, _old_format, _other_dtype])
def test_a_broken_npz_is_a_config_error_and_ensure_cache_renders_it_again(tmp_path, monkeypatch, spoil):
    monkeypatch.setattr(emoji_cache, "_sources_match", lambda meta: True)  # whatever is installed here
    npz = write_cache(tmp_path, _tiny())
    assert load_cache(tmp_path, 32).meta["checksum"] == _tiny().meta["checksum"]
    spoil(npz)
    with pytest.raises(ConfigError, match=r"ddm data fetch emoji --force") as err:
        load_cache(tmp_path, 32)
    assert "allow_pickle" not in str(err.value)
    rendered = []
    monkeypatch.setattr(
        emoji_cache, "render_all", lambda size, progress=True: rendered.append(size) or _tiny()
    )
    data, note = ensure_cache(tmp_path, 32, progress=False)
    assert rendered == [32] and note == "rendered again: same checksum as the cache it replaced"
    assert load_cache(tmp_path, 32).meta["checksum"] == data.meta["checksum"]


def test_a_json_of_an_older_format_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setattr(emoji_cache, "_sources_match", lambda meta: True)
    write_cache(tmp_path, _tiny())
    meta_path = emoji_cache.cache_paths(tmp_path, 32)[1]
    old = json.loads(meta_path.read_text())
    del old["heldout_fraction"]
    meta_path.write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="--force"):
        load_cache(tmp_path, 32)
    meta_path.write_text("[1, 2]")  # JSON, but not an object: as good as absent
    with pytest.raises(ConfigError, match="not found"):
        load_cache(tmp_path, 32)


def test_the_doctor_and_rendering_share_one_raqm_check(monkeypatch, tmp_path):
    from PIL import features

    from ddm.ops.data import emoji_render
    from ddm.ops.doctor.checks import FAIL
    from ddm.ops.doctor.emoji import emoji_sources

    monkeypatch.setattr(emoji_cache, "missing_packages", lambda: [])
    monkeypatch.setattr(features, "check", lambda name: name != "raqm")
    with pytest.raises(ConfigError, match="libraqm") as err:
        emoji_render.open_font(tmp_path / "any.ttf")
    check = emoji_sources()
    assert check.status == FAIL and check.fix == emoji_render.RAQM_FIX and str(err.value) in check.detail
