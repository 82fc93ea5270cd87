"""Deployment files: paths relative to the file, strict keys, clear errors."""

from __future__ import annotations

import pytest

from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError

GOOD = """
name = "demo"
[[experts]]
id = 0
checkpoint = "e0"
device = "cpu"
[[experts]]
id = 1
checkpoint = "sub/e1"
[router]
kind = "learned"
checkpoint = "router"
"""


def test_paths_are_relative_to_the_file(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text(GOOD)
    d = Deployment.load(path)
    assert d.name == "demo" and d.num_experts == 2
    assert d.experts[0].checkpoint == tmp_path / "e0" and d.experts[0].device == "cpu"
    assert d.experts[1].checkpoint == tmp_path / "sub" / "e1" and d.experts[1].device == "auto"
    assert d.router.kind == "learned" and d.router.checkpoint == tmp_path / "router"
    with pytest.raises(ConfigError, match="expert id"):
        d.expert(2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one"),
        ('[[experts]]\nid = 1\ncheckpoint = "a"\n', "ids 0..K-1"),
        ("[[experts]]\nid = 0\n", "checkpoint"),
        ('[[experts]]\nid = 0\ncheckpoint = "a"\ncolour = 1\n', "id, checkpoint, device"),
        ('[[experts]]\nid = 0\ncheckpoint = "a"\n[router]\nkind = "magic"\n', "kind in"),
        ('[[experts]]\nid = 0\ncheckpoint = "a"\n[router]\nkind = "learned"\n', "checkpoint exactly when"),
        (
            'port = 1\n[[experts]]\nid = 0\ncheckpoint = "a"\n',
            "keys name, guidance, strategy, class_names, on_expert_loss, experts, router",
        ),
        ("[[experts]\n", "invalid TOML"),
        (
            'on_expert_loss = "retry"\n[[experts]]\nid = 0\ncheckpoint = "a"\n',
            r"on_expert_loss in \['degrade'",
        ),
    ],
)
def test_malformed_files_say_what_was_expected(tmp_path, text, message):
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        Deployment.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        Deployment.load(tmp_path / "nope.toml")


def test_guidance_defaults_to_none_and_is_checked(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text(GOOD)
    assert Deployment.load(path).guidance == 1.0
    path.write_text("guidance = 2\n" + GOOD)
    assert Deployment.load(path).guidance == 2.0
    for bad in ("-1", "21", '"2"', "true"):
        path.write_text(f"guidance = {bad}\n" + GOOD)
        with pytest.raises(ConfigError, match=r"guidance, a number in \[0, 20\]"):
            Deployment.load(path)


def test_the_one_writer_round_trips_every_field(tmp_path):
    """Deployment.build + write is every producer's writer (ops, tests, distill, `ddm deployment write`)."""
    built = Deployment.build(
        tmp_path / "d" / "deployment.toml",
        ["e0", ("e1", "cpu"), ("sub/e2", "cuda", "bf16")],
        "learned",
        "router",
        name='a "quoted" name',
        guidance=1.5,
        strategy="topk:2",
        class_names=[f"class {c}" for c in range(10)],
        on_expert_loss="degrade",
        sampling={"solver": "ab2", "grid": "edm", "solvers": ["euler", "ab2"], "grids": ["uniform", "edm"]},
    )
    assert (built.sampling.default_solver, built.sampling.grids) == ("ab2", ("uniform", "edm"))
    path = built.write(comment="first line\nsecond line")
    assert path.read_text().startswith("# first line\n# second line\n")
    assert Deployment.load(path) == built
    assert [e.checkpoint for e in built.experts] == [tmp_path / "d" / f for f in ("e0", "e1", "sub/e2")]


def test_the_writer_refuses_what_the_reader_refuses(tmp_path):
    with pytest.raises(ConfigError, match="checkpoint exactly when kind = learned"):
        Deployment.build(tmp_path / "d.toml", ["e0"], "learned")


def test_sampling_defaults_to_every_solver_with_euler_on_the_uniform_grid(tmp_path):
    path = tmp_path / "deployment.toml"
    path.write_text(GOOD)
    offer = Deployment.load(path).sampling
    assert (offer.default_solver, offer.default_grid) == ("euler", "uniform")
    assert offer.solvers == ("euler", "heun", "midpoint", "ab2", "ab3")
    assert "[sampling]" not in Deployment.load(path).to_toml(), "a default offer writes nothing"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('solver = "rk4"', "solver one of euler, heun, midpoint, ab2, ab3, got 'rk4'"),
        ('solvers = ["euler"]\nsolver = "heun"', "default_solver one of euler, got 'heun'"),
        ('grids = ["uniform", "shift:3.0"]', "canonical spelling"),
        ("steps = 8", "keys among"),
    ],
)
def test_a_bad_sampling_table_names_the_allowed_values(tmp_path, table, message):
    path = tmp_path / "deployment.toml"
    path.write_text(GOOD + "[sampling]\n" + table + "\n")
    with pytest.raises(ConfigError, match=rf"\[sampling\]: .*{message}"):
        Deployment.load(path)


# -- the sample space ([sample_space]) ---------------------------------------------------------------


def test_no_sample_space_table_means_the_legacy_space_named_by_class_names(tmp_path):
    from ddm.schema.sample_space import LEGACY

    plain = Deployment.build(tmp_path / "a" / "deployment.toml", ["e0"], "oracle")
    assert plain.sample_space == LEGACY and not plain.declared_space
    names = [f"c{c}" for c in range(10)]
    renamed = Deployment.build(tmp_path / "b" / "deployment.toml", ["e0"], "oracle", class_names=names)
    assert renamed.sample_space.shape == (1, 32, 32) and renamed.sample_space.class_names == tuple(names)
    text = renamed.write()
    assert "[sample_space]" not in text.read_text()  # a legacy file reads as it did


@pytest.mark.parametrize(
    ("table", "shape", "classes"),
    [
        ({"shape": [3, 16, 16], "class_names": ["a", "b", "c"]}, (3, 16, 16), ("a", "b", "c")),
        ({"shape": [3, 32, 32], "value_range": [0, 1], "num_classes": 0}, (3, 32, 32), ()),
        ({"shape": [1, 8, 8], "num_classes": 2}, (1, 8, 8), ("0", "1")),
    ],
)
def test_a_sample_space_table_round_trips(tmp_path, table, shape, classes):
    built = Deployment.build(tmp_path / "deployment.toml", ["e0"], "learned", "router", sample_space=table)
    assert (
        built.sample_space.shape == shape and built.class_names == classes == built.sample_space.class_names
    )
    assert built.sample_space.null_class == len(classes)
    assert Deployment.load(built.write()) == built


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"sample_space": {"shape": [3, 16]}}, "shape"),
        ({"sample_space": {"shape": [3, 16, 16]}}, "class_names, or num_classes = 0"),
        ({"sample_space": {"shape": [3, 16, 16], "colour": 1, "num_classes": 0}}, "colour"),
        ({"sample_space": {"shape": [3, 16, 16], "value_range": [1, 0], "num_classes": 0}}, "value_range"),
        (
            {"sample_space": {"shape": [3, 4, 4], "class_names": ["a"]}, "class_names": ["b"]},
            "top-level class_names",
        ),
        ({"class_names": ["a", "b"]}, "10 non-empty strings"),
    ],
)
def test_a_bad_sample_space_is_refused(tmp_path, fields, match):
    with pytest.raises(ConfigError, match=match):
        Deployment.build(tmp_path / "deployment.toml", ["e0"], "learned", "router", **fields)
