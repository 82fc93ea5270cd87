"""`ddm import dit` from the command line (ops/cli/import_checkpoints.py): the diffusers fixtures
(ops/random_diffusers.py) become a deployment the router's loader accepts. (`ddm import
paris` from the command line: tests/pipeline/test_paris_pipeline.py.)"""

from __future__ import annotations

import pytest

from ddm.ops.cli import main
from ddm.schema.deployment import Deployment

pytest.importorskip("diffusers")  # the import extra (in dev: CI installs it)


def test_ddm_import_dit_writes_a_servable_deployment(tmp_path, capsys):
    from ddm.ops.random_diffusers import write_dit, write_vae
    from ddm.router.deployment_loader import read_deployment

    dits = [write_dit(tmp_path / f"dit{i}", seed=i) for i in range(2)]
    vae = write_vae(tmp_path / "vae")
    out = tmp_path / "out"
    argv = ["import", "dit", *map(str, dits), "--vae", str(vae), "--out", str(out), "--guidance", "3"]
    assert main(argv) == 0
    assert f"ddm up --deployment {out / 'deployment.toml'}" in capsys.readouterr().out
    deployment = Deployment.load(out / "deployment.toml")
    assert deployment.guidance == 3.0 and deployment.num_experts == 2
    loaded = read_deployment(deployment)  # the router's checks: cards, one sample space, the decoder's
    assert {card.architecture for card in loaded.cards.values()} == {"diffusers-dit"}
    assert loaded.decoder is not None


def test_a_folder_that_is_not_a_dit_is_refused_by_name(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["import", "dit", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) != 0
    assert "empty" in capsys.readouterr().err
    assert not (tmp_path / "out" / "deployment.toml").exists()
