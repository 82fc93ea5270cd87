"""`--prompt` on a class deployment is refused, naming what it is conditioned on (issue 37, part 11:
bad input gets a clear error and loses nothing); a control character in a prompt is refused by the
job's own check."""

from __future__ import annotations

from ddm.ops.cli import main


def test_a_prompt_on_a_class_deployment_is_refused_saying_why(label_split_deployment, tmp_path, capsys):
    argv = ["sample", "--deployment", str(label_split_deployment), "--n", "1", "--steps", "1"]
    assert main([*argv, "--prompt", "a red apple", "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "conditioned on class labels, not prompts" in err and "with labels instead" in err, err
    assert not (tmp_path / "x.png").exists(), "nothing sampled"
    assert main([*argv, "--prompt", "bell\x07", "--out", str(tmp_path / "x.png")]) == 2
    assert "without control characters" in capsys.readouterr().err
