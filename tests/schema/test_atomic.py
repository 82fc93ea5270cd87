"""schema/atomic.py: the one atomic-write helper (a reader sees the old whole file or the new one)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddm.schema.atomic import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic


def test_writes_replace_the_file_and_leave_nothing_beside_it(tmp_path):
    path = tmp_path / "record.json"
    write_text_atomic(path, "old")
    write_json_atomic(path, {"b": 1, "a": 2})
    assert path.read_text() == json.dumps({"a": 2, "b": 1}, indent=2) + "\n"
    write_bytes_atomic(tmp_path / "blob.bin", b"\x00\x01")
    assert (tmp_path / "blob.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.bin", "record.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["weights.bin"]


def test_the_temporary_keeps_the_suffix_numpy_savez_needs(tmp_path):
    path = tmp_path / "chunk.npz"
    with atomic_path(path) as tmp:
        np.savez(tmp, x=np.arange(3))  # a name without .npz would gain one, and the move would miss it
    assert np.load(path)["x"].tolist() == [0, 1, 2]
