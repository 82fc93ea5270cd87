"""`convert` (workers/convert.py) through the registry: torch -> jax -> torch gives back the same weights
and meta, each copy a valid checkpoint of its framework; a target the registry does not know is refused."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.ops.random_experts import make_random_expert
from ddm.schema.errors import ConfigError
from ddm.workers.checkpoint import read_meta
from ddm.workers.convert import convert
from ddm.workers.frameworks import FRAMEWORKS, framework_names


def test_torch_to_jax_and_back_keeps_the_weights(tmp_path):
    src = make_random_expert(tmp_path / "torch", "torch", range(5), seed=3)
    via_jax = convert(src, "jax", tmp_path / "jax")
    assert via_jax["framework"] == "jax" and via_jax["converted_from"]["framework"] == "torch"
    assert read_meta(tmp_path / "jax")["config"] == read_meta(src)["config"]
    back = convert(tmp_path / "jax", "torch", tmp_path / "back")
    assert {k: v for k, v in back.items() if k != "converted_from"} == {
        k: v for k, v in read_meta(src).items() if k != "converted_from"
    }
    original = FRAMEWORKS["torch"].load_canonical(src)
    for name, weights in (
        ("jax", FRAMEWORKS["jax"].load_canonical(tmp_path / "jax")),
        ("back", FRAMEWORKS["torch"].load_canonical(tmp_path / "back")),
    ):
        assert weights.keys() == original.keys(), name
        for key, value in original.items():
            np.testing.assert_array_equal(weights[key], value, err_msg=f"{name}: {key}")


def test_an_unknown_target_is_refused_naming_the_known_ones(tmp_path):
    src = make_random_expert(tmp_path / "torch", "torch", range(5))
    known = ", ".join(framework_names())
    with pytest.raises(ConfigError, match=rf"expected --to one of {known}, got 'mlx'"):
        convert(src, "mlx", tmp_path / "out")
    assert not (tmp_path / "out").exists()
