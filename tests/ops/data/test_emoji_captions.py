"""Captions of the emoji dataset from Unicode CLDR's English annotations (ddm.ops.data.emoji_captions):
the real en.xml of Debian's unicode-cldr-core (CI installs it; skipped with the apt line where it is
absent), the coverage of the dataset's emoji, deterministic variants, refusals of bad XML, and captions
following the images' held-out split without changing what the dataset returns."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ddm.ops.data import emoji_captions
from ddm.ops.data.emoji_captions import (
    CAPTIONS_APT,
    MAX_BYTES,
    Annotation,
    annotation_key,
    caption_sources,
    load_annotations,
    load_captions,
    parse_annotations,
    read_annotations,
    variants,
)
from ddm.schema.errors import ConfigError

APPLE, RED_HEART, ORANGE_HEART = "\U0001f34e", "\u2764\ufe0f", "\U0001f9e1"
# Measured with CLDR 41 (Debian 12's unicode-cldr-core) over Unicode 15.0's 1,870 base emoji: en.xml
# names 1,532, with annotationsDerived/en.xml 1,849; the 21 left are emoji new in 15.0 (pink heart,
# moose, goose, ...), newer than CLDR 41.
COVERAGE_FLOOR = 1840


@pytest.fixture(scope="module")
def table():
    if not emoji_captions.ANNOTATIONS.is_file():
        pytest.skip(f"CLDR annotations not installed ({emoji_captions.ANNOTATIONS}): `{CAPTIONS_APT}`")
    return load_annotations()


def test_known_captions_and_keywords(table):
    apple = table[annotation_key(APPLE)]
    assert apple == Annotation("red apple", ("apple", "fruit", "red"))
    # en.xml keys without U+FE0F: the fully-qualified red heart is found all the same
    assert table[annotation_key(RED_HEART)].name == "red heart"
    assert table[annotation_key(ORANGE_HEART)].name == "orange heart"
    # sequences only annotationsDerived/en.xml names
    assert table["\U0001f1fa\U0001f1f8"].name == "flag: United States"
    assert table[annotation_key("#\ufe0f\u20e3")].name == "keycap: #"


def test_coverage_of_the_datasets_emoji(table):
    from ddm.ops.data.emoji_cache import SOURCE_FILES, UNICODE_PACKAGE
    from ddm.ops.data.emoji_list import fold_skin_tones, read_emoji_test

    if not SOURCE_FILES[UNICODE_PACKAGE].is_file():
        pytest.skip(f"{UNICODE_PACKAGE} not installed")
    entries, _, _ = fold_skin_tones(read_emoji_test(SOURCE_FILES[UNICODE_PACKAGE]))
    hexes = [e.hex for e in entries]
    captions, _ = emoji_captions.caption_rows(hexes, table)
    covered = sum(c is not None for c in captions)
    assert covered >= COVERAGE_FLOOR, (covered, len(entries))
    main_only = emoji_captions.merge([read_annotations(caption_sources()[0])])
    assert sum(c is not None for c in emoji_captions.caption_rows(hexes, main_only)[0]) < covered
    # where CLDR names an emoji its name is emoji-test.txt's
    assert all(c is None or c == e.name for c, e in zip(captions, entries, strict=True))


def test_variants_are_deterministic_start_with_the_name_and_use_only_keywords(table):
    apple = table[annotation_key(APPLE)]
    got = variants(apple, annotation_key(APPLE), seed=0)
    # pinned: a change of the rule would silently change what models were trained on
    assert got == ("red apple", "fruit, red", "apple", "fruit, apple, red", "red fruit")
    assert got == variants(apple, annotation_key(APPLE), seed=0)
    assert variants(apple, annotation_key(APPLE), seed=1) != got
    assert variants(apple, annotation_key(APPLE), seed=0, count=2) == got[:2]
    for key, a in list(table.items())[::50]:
        vs = variants(a, key, seed=3)
        assert len(set(vs)) == len(vs) and (a.name is None or vs[0] == a.name)
        for v in vs[1:] if a.name else vs:
            words = v.split(", ") if ", " in v else None
            assert words is None or set(words) <= set(a.keywords)
    assert variants(Annotation(None, ()), "x") == ()


BAD = [
    (b"<ldml><annotations><annotation cp='a'>x</annotation>", "well-formed XML"),
    (b"<foo/>", "an <ldml> root"),
    (b"<ldml><identity/></ldml>", "an <annotations> element"),
    (b"<ldml><annotations/></ldml>", "at least one <annotation>"),
    (b"<ldml><annotations><note cp='a'>x</note></annotations></ldml>", "only <annotation> elements"),
    (b"<ldml><annotations><annotation>x</annotation></annotations></ldml>", "a cp attribute"),
    (b"<ldml><annotations><annotation cp='a'> </annotation></annotations></ldml>", "annotation text"),
    (b"<ldml><annotations><annotation cp='a' type='x'>y</annotation></annotations></ldml>", "type absent"),
    (
        b"<ldml><annotations><annotation cp='a' type='tts'>y</annotation>"
        b"<annotation cp='a' type='tts'>z</annotation></annotations></ldml>",
        "one name per emoji",
    ),
    (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        b"<ldml><annotations><annotation cp='a'>&b;</annotation></annotations></ldml>",
        "CLDR annotations XML without DTD declarations",
    ),
]


@pytest.mark.parametrize(("data", "why"), BAD)
def test_bad_xml_is_a_config_error_naming_the_file_and_what_was_expected(data, why):
    with pytest.raises(ConfigError, match=rf"^bad\.xml(:\d+:\d+)?: expected {re.escape(why)}"):
        parse_annotations(data, "bad.xml")


def test_a_file_too_large_or_missing_is_named(tmp_path):
    big = tmp_path / "big.xml"
    big.write_bytes(b" " * (MAX_BYTES + 1))
    with pytest.raises(ConfigError, match=r"big\.xml: expected a CLDR annotations file of at most"):
        read_annotations(big)
    with pytest.raises(ConfigError, match=r"no\.xml: cannot read .*unicode-cldr-core"):
        read_annotations(tmp_path / "no.xml")


def test_doctor_names_the_package_when_en_xml_is_missing_and_fails_on_a_broken_one(tmp_path, monkeypatch):
    from ddm.ops.doctor.emoji import emoji_captions as check

    monkeypatch.setattr(emoji_captions, "ANNOTATIONS", tmp_path / "en.xml")
    got = check()
    assert got.status == "skip" and "unicode-cldr-core" in got.detail
    assert got.fix == "apt-get install -y unicode-cldr-core"
    (tmp_path / "en.xml").write_bytes(b"<ldml><annotations>")
    got = check()
    assert got.status == "FAIL" and "en.xml" in got.detail and "well-formed XML" in got.detail


def test_doctor_says_ok_where_the_package_is(table):
    from ddm.ops.doctor.emoji import emoji_captions as check

    got = check()
    assert got.status == "ok" and "annotations/en.xml" in got.detail and "annotationsDerived" in got.detail


def test_captions_follow_the_images_split_and_the_dataset_is_unchanged(table, tmp_path):
    from ddm.ops.data.dataset import Dataset, load_dataset
    from ddm.ops.data.emoji_cache import missing_packages, render_all, write_cache
    from ddm.ops.data.emoji_list import is_heldout

    if missing_packages():
        pytest.skip(f"the emoji sources are not installed ({', '.join(missing_packages())})")
    rendered = render_all(32, progress=False, select=slice(None, None, 60))
    write_cache(tmp_path, rendered)
    a = rendered.arrays
    for split, mask in (("train", ~a["heldout"]), ("test", a["heldout"])):
        data, caps = load_dataset("emoji", split, tmp_path), load_captions("emoji", split, tmp_path)
        # what the dataset returns is what boolean indexing of the cache gave before captions existed
        before = Dataset("emoji", split, a["images"][mask], a["labels"][mask])
        assert data.sha256 == before.sha256 and np.array_equal(data.labels, before.labels)
        assert len(caps) == len(data) and list(caps.codepoints) == a["codepoints"][mask].tolist()
        families = dict(zip(a["codepoints"].tolist(), a["families"].tolist(), strict=True))
        assert all(is_heldout(families[h]) == (split == "test") for h in caps.codepoints)
        assert caps.covered >= len(caps) - 1
        assert all(v[0] == c for c, v in zip(caps.captions, caps.variants, strict=True) if c)
    first = load_captions("emoji", "train", tmp_path)
    assert load_captions("emoji", "train[1:3]", tmp_path).captions == first.captions[1:3]
    assert load_captions("emoji", "train", tmp_path, seed=0).variants == first.variants
    with pytest.raises(ConfigError, match="a range inside"):
        load_captions("emoji", "test[:100000]", tmp_path)
    with pytest.raises(ConfigError, match="a rendered dataset"):
        load_captions("mnist", "test", tmp_path)
