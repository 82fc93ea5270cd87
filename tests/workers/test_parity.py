"""The twin UNets: PyTorch and Flax give the same velocity for the same weights, for every preset."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax.traverse_util import flatten_dict

from ddm.schema.errors import ConfigError
from ddm.schema.flow import NULL_CLASS
from ddm.workers.config import PRESETS
from ddm.workers.jax_expert.unet import UNet as FlaxUNet
from ddm.workers.jax_expert.unet import init_params
from ddm.workers.layout import canonical_to_flax, flax_to_canonical
from ddm.workers.torch_expert.unet import UNet as TorchUNet
from tests.support.weights import randomize_

TOLERANCE = 1e-4


def _flatten(tree: dict) -> dict:
    return flatten_dict(tree, sep=".")


def flax_template(cfg) -> dict:
    """The params tree init_params builds, as zeros: only its structure and shapes matter here.

    jax.eval_shape traces init_params without running it (eager init costs tens of seconds on a busy
    CPU); test_template_matches_init_params checks it is the same tree.
    """
    shapes = jax.eval_shape(partial(init_params, FlaxUNet(cfg), 0))
    return jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes)


def randomized_torch_unet(cfg, seed: int = 1) -> TorchUNet:
    """A torch UNet with every parameter random (init leaves out_conv at zero, which would hide bugs).

    Weights ~ N(0, 1/fan_in) keep activations O(1) through the net; GroupNorm scales near 1.
    """
    return randomize_(TorchUNet(cfg).eval(), seed, unit="class_emb")


def canonical(model: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def inputs(batch: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 1, 32, 32)).astype(np.float32)
    t = np.array([0.0, 0.37, 0.81, 1.0], np.float32)[:batch]
    y = np.array([0, 3, 9, NULL_CLASS], np.int64)[:batch]
    return x, t, y


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_torch_and_flax_agree(preset):
    cfg = PRESETS[preset]
    model = randomized_torch_unet(cfg)
    sd = canonical(model)
    flax_model = FlaxUNet(cfg)
    params = canonical_to_flax(sd, flax_template(cfg))
    x, t, y = inputs()
    with torch.no_grad():
        v_torch = model(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(y)).numpy()
    v_jax = jax.jit(flax_model.apply)(
        {"params": params}, jnp.asarray(x.transpose(0, 2, 3, 1)), jnp.asarray(t), jnp.asarray(y)
    )
    v_jax = np.asarray(v_jax).transpose(0, 3, 1, 2)  # NHWC -> NCHW
    assert v_jax.shape == v_torch.shape == x.shape
    assert np.std(v_torch) > 0.05, "random weights should give a non-trivial velocity"
    diff = float(np.max(np.abs(v_torch - v_jax)))
    print(f"\nparity {preset}: max |v_torch - v_jax| = {diff:.3e} (|v| max {np.abs(v_torch).max():.2f})")
    assert diff <= TOLERANCE
    # the rows differ (t and y reach the output), so agreement is not agreement on a constant
    assert np.max(np.abs(v_torch[0] - v_torch[3])) > 1e-3


def test_template_matches_init_params():
    cfg = PRESETS["tiny"]
    real = _flatten(init_params(FlaxUNet(cfg), 0))
    fake = _flatten(flax_template(cfg))
    assert {k: v.shape for k, v in real.items()} == {k: v.shape for k, v in fake.items()}


def test_layout_round_trip_is_exact():
    sd = canonical(randomized_torch_unet(PRESETS["tiny"], seed=3))
    back = flax_to_canonical(canonical_to_flax(sd, flax_template(PRESETS["tiny"])))
    assert set(back) == set(sd)
    for name, arr in sd.items():
        assert back[name].shape == arr.shape, name
        assert back[name].dtype == np.float32, name
        np.testing.assert_array_equal(back[name], arr, err_msg=name)


def test_flax_layout_axis_orders():
    cfg = PRESETS["tiny"]
    sd = canonical(randomized_torch_unet(cfg))
    params = canonical_to_flax(sd, flax_template(cfg))
    conv = sd["enc1.conv1.weight"]  # torch [O, I, kh, kw]
    np.testing.assert_array_equal(params["enc1"]["conv1"]["kernel"], conv.transpose(2, 3, 1, 0))
    np.testing.assert_array_equal(params["enc1"]["emb"]["kernel"], sd["enc1.emb.weight"].T)
    np.testing.assert_array_equal(params["enc1"]["norm1"]["scale"], sd["enc1.norm1.weight"])
    np.testing.assert_array_equal(params["class_emb"]["embedding"], sd["class_emb.weight"])


def test_checkpoint_of_another_preset_is_refused_naming_the_shape():
    sd = canonical(TorchUNet(PRESETS["tiny"]))
    with pytest.raises(ConfigError, match=r"of shape \(.*\), got \(") as info:
        canonical_to_flax(sd, flax_template(PRESETS["small"]))
    message = str(info.value)
    assert "32" in message and "16" in message  # small's c=32 expected, tiny's c=16 arrived


def test_missing_or_extra_parameters_are_refused():
    cfg = PRESETS["tiny"]
    like = flax_template(cfg)
    sd = canonical(TorchUNet(cfg))
    missing = {k: v for k, v in sd.items() if k != "dec0.skip.weight"}
    with pytest.raises(ConfigError, match="dec0.skip.weight"):
        canonical_to_flax(missing, like)
    with pytest.raises(ConfigError, match="extra.weight"):
        canonical_to_flax({**sd, "extra.weight": np.zeros(3, np.float32)}, like)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_both_frameworks_have_the_same_parameter_count(preset):
    cfg = PRESETS[preset]
    n_torch = sum(p.numel() for p in TorchUNet(cfg).parameters())
    n_flax = sum(a.size for a in _flatten(flax_template(cfg)).values())
    assert n_torch == n_flax
    assert len(TorchUNet(cfg).state_dict()) == len(_flatten(flax_template(cfg)))  # no buffers


def test_base_is_the_seed_size():
    n = sum(p.numel() for p in TorchUNet(PRESETS["base"]).parameters())
    assert 6.0e6 <= n <= 7.0e6, n
