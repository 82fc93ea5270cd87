"""`ddm import paris` on a fixture in Paris's exact layout (tests/support/paris_fixture.py: real tensor
names, tiny widths, CLIP's real BPE vocabulary, a tiny AutoencoderKL): the folder checked from its
headers, a mismatch refused with its lists, the deployment written, and the imported experts and router
computing exactly Paris's networks under this system's conventions (t = 0 noise; v = data - noise)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from tests.support.paris_fixture import TINY_EXPERT, TINY_ROUTER, random_state, write_paris_fixture

pytest.importorskip("diffusers")  # the import extra (in dev: CI installs it)


@pytest.fixture(scope="module")
def paris(tmp_path_factory):
    return write_paris_fixture(tmp_path_factory.mktemp("paris") / "paris")


@pytest.fixture(scope="module")
def imported(paris, tmp_path_factory):
    from ddm.ops.importers.paris import import_paris

    return import_paris(paris, tmp_path_factory.mktemp("out") / "deployment", jax_experts=frozenset({1}))


def test_the_deployment_serves_the_folder_in_place_with_paris_sampling(paris, imported):
    d = Deployment.load(imported)
    assert (d.guidance, d.strategy, d.sampling.default_grid) == (7.5, "topk:2", "flowmatch")
    text = d.conditioning.text
    assert (text.tokenizer, text.form, text.max_tokens, text.width) == ("clip-bpe", "tokens", 77, 24)
    assert d.text_encoder.checkpoint == paris / "text_encoder"
    assert d.text_encoder.tokenizer == paris / "tokenizer"
    assert d.sample_space.shape == (4, TINY_EXPERT.image_size, TINY_EXPERT.image_size)
    frameworks = []
    for i, entry in enumerate(d.experts):
        meta = json.loads((entry.checkpoint / "meta.json").read_text())
        assert meta["weights"] == str(paris / f"expert_{i}" / "diffusion_pytorch_model.safetensors")
        card = meta["card"]
        assert (card["architecture"], card["objective"], card["time_convention"]) == (
            "paris",
            "flow-velocity",
            "t0-data",
        )
        frameworks.append(meta["framework"])
    assert frameworks == ["torch", "jax"]
    # nothing of Paris's was copied: the output holds meta.json files and the deployment only
    sizes = [p.stat().st_size for p in imported.parent.rglob("*") if p.is_file()]
    assert max(sizes) < 64_000


def test_the_imported_experts_are_paris_networks_in_our_convention(paris, imported):
    import torch
    from safetensors.torch import load_file

    from ddm.workers import load_expert
    from ddm.workers.paris.torch_model import ParisExpert

    d = Deployment.load(imported)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 8, 8), dtype=np.float32)
    t = np.array([0.0, 0.37, 0.999], np.float32)
    tokens = rng.standard_normal((3, 77, 24), dtype=np.float32)
    model = ParisExpert(TINY_EXPERT)
    model.load_state_dict(load_file(str(paris / "expert_0" / "diffusion_pytorch_model.safetensors")))
    with torch.no_grad():  # Paris: s = 1 - t on 0..1000, and it answers noise - data = -(our velocity)
        want = -model.eval()(torch.from_numpy(x), torch.from_numpy(1000 * (1 - t)), torch.from_numpy(tokens))
    got = load_expert(d.experts[0].checkpoint, "cpu").velocity(x, t, cond=tokens)
    np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=1e-5)


def test_flax_serves_paris_as_pytorch_does(imported, tmp_path):
    from ddm.workers import load_expert

    d = Deployment.load(imported)
    meta = json.loads((d.experts[1].checkpoint / "meta.json").read_text())
    twin = tmp_path / "twin"
    twin.mkdir()
    torch_meta = {**meta, "framework": "torch", "card": {**meta["card"], "framework": "torch"}}
    (twin / "meta.json").write_text(json.dumps(torch_meta))  # the same weights, served by PyTorch
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 4, 8, 8), dtype=np.float32)
    t = np.array([0.0, 0.25, 0.6, 1.0], np.float32)
    cond, uncond = (rng.standard_normal((4, 77, 24), dtype=np.float32) for _ in range(2))
    g = np.array([7.5, 1.0, 3.0, 0.0], np.float32)
    v_jax = load_expert(d.experts[1].checkpoint, "cpu").velocity(x, t, guidance=g, cond=cond, uncond=uncond)
    v_torch = load_expert(twin, "cpu").velocity(x, t, guidance=g, cond=cond, uncond=uncond)
    assert np.abs(v_torch).max() > 0.1
    np.testing.assert_allclose(v_jax, v_torch, rtol=0, atol=1e-4)


def test_the_router_is_paris_router_in_our_time(paris, imported):
    import torch
    from safetensors.torch import load_file

    from ddm.router.deployment_loader import load_policy
    from ddm.workers.paris.torch_model import ParisRouter

    policy = load_policy(Deployment.load(imported))
    assert policy.num_experts == 2 and not policy.reads_prompts
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 8, 8), dtype=np.float32)
    t = np.array([0.0, 0.5, 0.9], np.float32)
    model = ParisRouter(TINY_ROUTER)
    model.load_state_dict(load_file(str(paris / "router" / "pytorch_model.safetensors")))
    with torch.no_grad():
        want = torch.softmax(model.eval()(torch.from_numpy(x), torch.from_numpy(1000 * (1 - t))), -1).numpy()
    np.testing.assert_allclose(policy.route_probs(x, t, np.zeros(3, np.int64)), want, rtol=0, atol=1e-6)


def _refusal(paris, tmp_path, change) -> str:
    from ddm.ops.importers.paris import import_paris

    copy = tmp_path / "paris"
    shutil.copytree(paris, copy)
    change(copy)
    with pytest.raises(ConfigError) as refused:
        import_paris(copy, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written
    return str(refused.value)


def test_a_mismatched_expert_is_refused_with_its_lists(paris, tmp_path):
    from safetensors.torch import save_file

    from ddm.workers.paris.torch_model import ParisExpert

    def damage(root):
        state = random_state(ParisExpert(TINY_EXPERT), 7)
        del state["layers.1.cross_attn.in_proj_bias"]
        state["layers.0.extra_gate"] = state["t_block.1.bias"].clone()
        save_file(state, str(root / "expert_1" / "diffusion_pytorch_model.safetensors"))

    message = _refusal(paris, tmp_path, damage)
    assert "Paris expert 1" in message
    assert "missing (1): layers.1.cross_attn.in_proj_bias" in message
    assert "unexpected (1): layers.0.extra_gate" in message


def test_a_router_for_other_experts_and_a_missing_stage_are_refused(paris, tmp_path):
    def other_top(root):
        top = json.loads((root / "config.json").read_text())
        (root / "config.json").write_text(json.dumps({**top, "num_experts": 3}))

    assert "expert_2" in _refusal(paris, tmp_path / "a", other_top)
    assert "text_encoder" in _refusal(
        paris, tmp_path / "b", lambda root: shutil.rmtree(root / "text_encoder")
    )
    vae_weights = "vae/diffusion_pytorch_model.safetensors"
    assert "vae" in _refusal(paris, tmp_path / "c", lambda root: (root / vae_weights).unlink())
