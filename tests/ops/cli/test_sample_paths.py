"""`ddm sample` says where it wrote: the absolute path of every file (its default --out, samples.png,
lands in whatever folder the command ran from, and the output used to name it only as given)."""

from __future__ import annotations

import json

from ddm.ops.cli import main


def test_sample_prints_the_absolute_paths_it_wrote(label_split_deployment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["sample", "--deployment", str(label_split_deployment), "--label", "1", "--n", "1", "--steps", "1"]
    assert main([*argv, "--npy", "sub/x.npy"]) == 0
    png, npy = tmp_path / "samples.png", tmp_path / "sub" / "x.npy"
    assert png.is_file() and npy.is_file()
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(f"; wrote {png}, {npy}")
    assert main([*argv, "--out", "g.png", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["saved"] == [str(tmp_path / "g.png")]
