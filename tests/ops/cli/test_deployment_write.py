"""`ddm deployment write` declares the experts' sample space: the file a script writes for RGB experts
names their space (and `ddm up` reads it back), while legacy experts keep a file without the table."""

from __future__ import annotations

from ddm.ops.cli import main
from ddm.ops.random_experts import make_random_expert
from ddm.schema.deployment import Deployment
from ddm.schema.sample_space import LEGACY, SampleSpace

RGB = SampleSpace((3, 16, 16), (-1.0, 1.0), 3, ("red", "green", "blue"))


def test_the_written_file_declares_the_experts_sample_space(tmp_path, capsys):
    for e in range(2):
        make_random_expert(tmp_path / f"e{e}", "torch", range(3), seed=e, sample_space=RGB)
    out = tmp_path / "deployment.toml"
    assert main(["deployment", "write", str(out), "--expert", "e0", "--expert", "e1:cpu"]) == 0
    assert "[sample_space]" in out.read_text()
    loaded = Deployment.load(out)
    assert loaded.sample_space == RGB and loaded.class_names == RGB.class_names


def test_legacy_experts_keep_a_file_without_a_sample_space_table(tmp_path, capsys):
    make_random_expert(tmp_path / "e0", "torch", range(10), seed=0)
    out = tmp_path / "deployment.toml"
    assert main(["deployment", "write", str(out), "--expert", "e0"]) == 0
    assert "[sample_space]" not in out.read_text()
    assert Deployment.load(out).sample_space == LEGACY


def test_a_text_deployment_names_its_encoder_and_tokenizer_folders(tmp_path, capsys):
    from tests.support.text import TEXT_SPACE, needs_text_encoder, text_conditioning

    needs_text_encoder()
    from ddm.workers.text_encoder import model_dir

    conditioning = text_conditioning()
    make_random_expert(tmp_path / "e0", "torch", (), sample_space=TEXT_SPACE, conditioning=conditioning)
    out = tmp_path / "deployment.toml"
    assert main(["deployment", "write", str(out), "--expert", "e0", "--text-encoder", str(model_dir())]) == 0
    loaded = Deployment.load(out)
    assert loaded.conditioning == conditioning and loaded.text_encoder.device == "cpu"
    assert loaded.text_encoder.checkpoint == loaded.text_encoder.tokenizer == model_dir()
    argv = [
        "deployment",
        "write",
        str(out),
        "--expert",
        "e0",
        "--text-encoder",
        "te:auto",
        "--tokenizer",
        "tok",
    ]
    assert main(argv) == 0
    entry = Deployment.load(out).text_encoder
    assert (entry.checkpoint, entry.tokenizer, entry.device) == (tmp_path / "te", tmp_path / "tok", "auto")
