"""Paris's expert and router in this system's code (issue 38 part 2, workers/paris/): the tensors a
config makes are exactly the PyTorch modules' state dicts, at Paris's full size 606.0M and 129.1M
parameters; a checkpoint folder in Paris's layout is read back into its config from the headers alone,
loads strictly, and a mismatched one is refused with the lists of what differs; the Flax expert, given
the same safetensors converted at load, answers what the PyTorch one does within 1e-4.

Before: nothing here could read a single Paris tensor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.schema.errors import ConfigError
from ddm.workers.paris.config import (
    ParisExpertConfig,
    ParisRouterConfig,
    expert_config_from,
    expert_shapes,
    parameter_count,
    router_config_from,
    router_shapes,
)
from ddm.workers.paris.weights import check_tensors, load_numpy, tensor_shapes
from tests.support.paris_fixture import TINY_EXPERT, TINY_ROUTER, write_paris_fixture

torch = pytest.importorskip("torch")

EXPERT_FILE = "expert_{}/diffusion_pytorch_model.safetensors"
ROUTER_FILE = "router/pytorch_model.safetensors"


@pytest.fixture(scope="module")
def paris(tmp_path_factory) -> Path:
    return write_paris_fixture(tmp_path_factory.mktemp("paris"), stages=False)


@pytest.mark.parametrize(
    ("config", "shapes", "millions"),
    [(ParisExpertConfig(), expert_shapes, 606.0), (ParisRouterConfig(), router_shapes, 129.1)],
)
def test_full_size_tensors_are_the_modules_and_count_as_papers(config, shapes, millions):
    from ddm.workers.paris.torch_model import ParisExpert, ParisRouter

    model = ParisExpert if isinstance(config, ParisExpertConfig) else ParisRouter
    with torch.device("meta"):  # shapes only: 2.4 GB of weights never allocated
        module = model(config)
    assert {k: tuple(v.shape) for k, v in module.state_dict().items()} == shapes(config)
    assert round(parameter_count(shapes(config)) / 1e6, 1) == millions


def test_a_paris_folder_reads_back_its_configs_and_loads_strictly(paris):
    from ddm.workers.paris.torch_model import ParisExpert, ParisRouter

    for i in range(TINY_ROUTER.num_experts):
        found = tensor_shapes(paris / EXPERT_FILE.format(i))
        check_tensors(found, expert_shapes(TINY_EXPERT), f"expert {i}")
        assert expert_config_from(found, heads=TINY_EXPERT.heads) == TINY_EXPERT
    found = tensor_shapes(paris / ROUTER_FILE)
    assert router_config_from(found, heads=TINY_ROUTER.heads) == TINY_ROUTER
    router = ParisRouter(TINY_ROUTER)
    router.load_state_dict(_torch_state(paris / ROUTER_FILE), strict=True)
    logits = router(torch.randn(3, 4, 8, 8), torch.tensor([0.0, 500.0, 1000.0]))
    assert logits.shape == (3, TINY_ROUTER.num_experts) and torch.isfinite(logits).all()
    expert = ParisExpert(TINY_EXPERT)
    expert.load_state_dict(_torch_state(paris / EXPERT_FILE.format(0)), strict=True)


def _torch_state(path: Path) -> dict:
    return {k: torch.from_numpy(v) for k, v in load_numpy(path).items()}


def test_a_mismatched_checkpoint_is_refused_with_its_lists(paris, tmp_path):
    from safetensors.torch import save_file

    state = _torch_state(paris / EXPERT_FILE.format(0))
    state["layers.0.attn.in_proj_weight_renamed"] = state.pop("layers.0.attn.in_proj_weight")
    del state["final_layer.scale_shift_table"]
    state["text_proj.weight"] = torch.zeros(32, 77)  # another text encoder's width
    bad = tmp_path / "bad.safetensors"
    save_file(state, str(bad))
    with pytest.raises(ConfigError) as refused:
        check_tensors(tensor_shapes(bad), expert_shapes(TINY_EXPERT), "expert 0")
    text = str(refused.value)
    assert "missing (2): final_layer.scale_shift_table, layers.0.attn.in_proj_weight" in text, text
    assert "unexpected (1): layers.0.attn.in_proj_weight_renamed" in text, text
    assert "text_proj.weight [32, 77] (expected [32, 24])" in text, text
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(ConfigError, match="not a readable safetensors file"):
        tensor_shapes(tmp_path / "junk.safetensors")


def test_the_flax_expert_equals_the_pytorch_one(paris):
    import jax.numpy as jnp

    from ddm.workers.paris.flax_model import ParisExpert as FlaxExpert
    from ddm.workers.paris.flax_model import flax_params
    from ddm.workers.paris.torch_model import ParisExpert

    state = load_numpy(paris / EXPERT_FILE.format(1))
    expert = ParisExpert(TINY_EXPERT)
    expert.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 8, 8)).astype(np.float32)
    t = np.array([1.0, 480.0, 999.0], np.float32)
    text = rng.standard_normal((3, 5, TINY_EXPERT.text_width)).astype(np.float32)
    with torch.no_grad():
        want = expert(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(text)).numpy()
    got = FlaxExpert(TINY_EXPERT).apply(
        flax_params(state, TINY_EXPERT.depth),
        jnp.asarray(x.transpose(0, 2, 3, 1)),
        jnp.asarray(t),
        jnp.asarray(text),
    )
    got = np.asarray(got).transpose(0, 3, 1, 2)
    diff = float(np.abs(got - want).max())
    print(f"Paris expert |flax - torch|: max {diff:.2e}, |torch| up to {np.abs(want).max():.2f}")
    assert diff <= 1e-4
