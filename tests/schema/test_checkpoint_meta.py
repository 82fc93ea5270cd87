"""The checkpoint meta record (schema/checkpoint_meta.py): one writer, one checked reader."""

from __future__ import annotations

import json

import pytest

from ddm.schema.checkpoint_meta import META_FILE, kind_of, read_meta, write_meta
from ddm.schema.errors import ConfigError

EXPERT = {"framework": "torch", "config": {"channels": 16}, "expert": 0}
ROUTER = {"kind": "router", "framework": "jax", "config": {}, "partition": {"id": "abc"}}
CLASSIFIER = {"kind": "classifier", "framework": "torch", "dataset": "mnist"}


@pytest.mark.parametrize("meta", [EXPERT, ROUTER, CLASSIFIER], ids=["expert", "router", "classifier"])
def test_write_then_read_round_trips_with_format_1(tmp_path, meta):
    path = write_meta(tmp_path / "ckpt", meta)
    assert path == tmp_path / "ckpt" / META_FILE
    assert sorted(p.name for p in path.parent.iterdir()) == [META_FILE]  # no temporary file left
    assert read_meta(tmp_path / "ckpt", kind=kind_of(meta)) == {"format": 1, **meta}


def test_a_meta_without_kind_is_an_experts(tmp_path):
    (tmp_path / META_FILE).write_text(json.dumps(EXPERT))  # as checkpoints written before `kind` existed
    assert kind_of(read_meta(tmp_path)) == "expert"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"framework": "torch"}, r"the expert fields \['framework', 'config'\]"),
        ({k: v for k, v in ROUTER.items() if k != "partition"}, "router fields"),
        ({**CLASSIFIER, "kind": "vae"}, "kind in"),
        ({**EXPERT, "format": 2}, "format 1"),
        ({**EXPERT, "config": [16]}, "config a JSON object"),
        ({**EXPERT, "framework": 1}, "framework a string"),
    ],
    ids=[
        "expert-without-config",
        "router-without-partition",
        "unknown-kind",
        "format-2",
        "config-not-an-object",
        "framework-not-a-string",
    ],
)
def test_writer_refuses_an_incomplete_record(tmp_path, meta, message):
    with pytest.raises(ConfigError, match=message):
        write_meta(tmp_path, meta)
    assert not (tmp_path / META_FILE).exists()


def test_reader_checks_what_it_reads(tmp_path):
    with pytest.raises(ConfigError, match="meta.json"):
        read_meta(tmp_path / "missing")
    (tmp_path / META_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_meta(tmp_path)
    (tmp_path / META_FILE).write_text(json.dumps({"framework": "jax"}))
    with pytest.raises(ConfigError, match="expert fields"):
        read_meta(tmp_path)
    write_meta(tmp_path, ROUTER)
    with pytest.raises(ConfigError, match="kind = classifier"):
        read_meta(tmp_path, kind="classifier")
