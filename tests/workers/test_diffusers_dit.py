"""A diffusers DiTTransformer2DModel served as an expert (workers/diffusers_dit/, ops/importers/
diffusers_dit.py): its velocity is the card's conversion of the diffusers model's own eps output at the
matched DDPM timestep, written out here by hand from DDPM's formulas; the import checks tensors and
scheduler configs and refuses what it cannot serve."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ddm.ops.importers.diffusers_dit import import_dit, objective_of
from ddm.ops.random_diffusers import write_dit, write_vae
from ddm.schema.errors import ConfigError
from ddm.workers import load_expert
from ddm.workers.architectures import expert_architecture
from ddm.workers.diffusers_dit.config import PRESETS, DiffusersDiTConfig

NULL = 10  # the fixture's num_embeds_ada_norm: the null class


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("dit")
    dit, vae = write_dit(root / "dit", seed=0), write_vae(root / "vae")
    return dit, import_dit([dit], vae, root / "deployment", preview_samples=2)


def test_registered_for_torch_only_and_its_config_is_the_folders():
    record = expert_architecture("diffusers-dit")
    assert record.config is DiffusersDiTConfig and set(record.models) == {"torch"}
    xl = PRESETS["xl-2"]
    assert (xl.num_attention_heads * xl.attention_head_dim, xl.num_layers, xl.learned_sigma) == (
        1152,
        28,
        True,
    )


def test_the_folder_is_served_in_place(imported):
    dit, deployment = imported
    folder = deployment.parent / "expert_0"
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json"]  # nothing copied
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["weights"] == str(dit / "diffusion_pytorch_model.safetensors")
    assert DiffusersDiTConfig.from_dict(meta["config"]) == DiffusersDiTConfig.from_diffusers(
        json.loads((dit / "config.json").read_text())
    )
    card = meta["card"]
    assert (card["objective"], card["time_convention"]) == ("ddpm-eps", "t0-data")
    assert card["schedule"] == {
        "name": "discrete-linear",
        "beta_start": 1e-4,
        "beta_end": 0.02,
        "steps": 1000.0,
    }


def by_hand(dit_dir, x_t, t, y, guidance, value_range=(-8.0, 8.0)):
    """The DDPM eps -> velocity conversion written out: match the SNR t^2 / (1 - t)^2 on DDPM's float64
    alpha_bar (interpolated in log between whole steps), run diffusers' own model at that timestep, and
    return x1^ - x0^ with x1^ clipped into the value range; guided as v_null + g (v_y - v_null)."""
    import torch
    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel.from_pretrained(str(dit_dir), use_safetensors=True, low_cpu_mem_usage=False)
    log_ab = np.log(np.cumprod(1.0 - np.linspace(1e-4, 0.02, 1000, dtype=np.float64)))
    t64 = t.astype(np.float64)
    r = np.sqrt(t64**2 + (1 - t64) ** 2)
    step = np.interp(-np.log((t64 / r) ** 2), -log_ab, np.arange(1000.0))  # alpha_bar(step) = (t / r)^2
    ab = np.exp(np.interp(step, np.arange(1000.0), log_ab))[:, None, None, None]
    x_s = (x_t / r[:, None, None, None]).astype(np.float32)

    def velocity(labels):
        with torch.no_grad():
            out = model(torch.from_numpy(x_s), timestep=torch.from_numpy(step.astype(np.float32)),
                        class_labels=torch.from_numpy(labels)).sample  # fmt: skip
        eps = out[:, :4].double().numpy()  # learned sigma: the first in_channels are eps
        x1 = np.clip((x_s - np.sqrt(1 - ab) * eps) / np.sqrt(ab), *value_range)
        # x1^ - x0^, from the estimate trusted at that end (objectives' docstring; equal when unclipped)
        tc, xt = t64[:, None, None, None], x_t.astype(np.float64)
        return np.where(tc < 0.5, (x1 - xt) / (1 - tc), (xt - eps) / tc)

    v_y, v_null = velocity(y), velocity(np.full_like(y, NULL))
    g = np.asarray(guidance, np.float64)[:, None, None, None]
    return v_null + g * (v_y - v_null)


def test_the_velocity_is_the_conversion_of_the_diffusers_models_own_eps(imported):
    dit, deployment = imported
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 8, 8)).astype(np.float32)
    t = np.array([0.05, 0.3, 0.5, 0.8, 0.95], np.float32)
    y = np.array([0, 3, 9, NULL, 7])
    g = np.array([1.0, 4.0, 1.0, 1.0, 2.5], np.float32)
    got = load_expert(deployment.parent / "expert_0", "cpu").velocity(x, t, y, g)
    want = by_hand(dit, x, t, y, g)
    assert np.abs(want).max() > 0.5  # a real answer, not zeros
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    off = by_hand(dit, x, np.clip(t + 0.02, 0, 1), y, g)  # the wrong timestep is told apart
    assert np.abs(got - off).max() > 1e-2


def test_the_ends_of_time_answer_finite_velocities(imported):
    """t = 0 (noise: step 999, x1^ clipped into the value range) and t = 1 (data: step 0) included."""
    _, deployment = imported
    expert = load_expert(deployment.parent / "expert_0", "cpu")
    x = np.random.default_rng(5).standard_normal((4, 4, 8, 8)).astype(np.float32)
    t, y = np.array([0.0, 1e-4, 0.9999, 1.0], np.float32), np.array([0, 1, 2, NULL])
    assert np.isfinite(expert.velocity(x, t, y, 4.0)).all()
    v = expert.velocity(x, t, y, 1.0)
    assert np.abs(v[0]).max() <= 8.0 + np.abs(x[0]).max() + 1e-3  # (x1^ - x_t) / (1 - t), x1^ in [-8, 8]


def test_a_mismatched_checkpoint_is_refused_with_its_list(tmp_path):
    from safetensors.torch import load_file, save_file

    dit = write_dit(tmp_path / "dit")
    weights = dit / "diffusion_pytorch_model.safetensors"
    state = load_file(str(weights))
    state.pop("proj_out_2.bias")
    state["extra.weight"] = state["proj_out_2.weight"][:1].clone()
    save_file(state, str(weights))
    with pytest.raises(
        ConfigError, match=r"missing \(1\): proj_out_2.bias(.|\n)*unexpected \(1\): extra.weight"
    ):
        import_dit([dit], write_vae(tmp_path / "vae"), tmp_path / "out")


def test_pickled_weights_are_refused_never_loaded(tmp_path):
    dit = write_dit(tmp_path / "dit")
    (dit / "diffusion_pytorch_model.safetensors").rename(dit / "diffusion_pytorch_model.bin")
    with pytest.raises(ConfigError, match=r"\.bin weights are never unpickled here"):
        import_dit([dit], write_vae(tmp_path / "vae"), tmp_path / "out")


def test_dits_that_disagree_on_the_sample_are_refused(tmp_path):
    vae = write_vae(tmp_path / "vae")
    ten, twelve = write_dit(tmp_path / "a"), write_dit(tmp_path / "b", num_classes=12)
    with pytest.raises(ConfigError, match="12 classes"):
        import_dit([ten, twelve], vae, tmp_path / "out")


def test_a_pipeline_root_gives_its_scheduler_names_and_vae(tmp_path):
    root = tmp_path / "pipeline"
    write_dit(root / "transformer")
    write_vae(root / "vae")
    (root / "scheduler").mkdir()
    scheduler = {"_class_name": "DDIMScheduler", "beta_schedule": "linear", "beta_start": 2e-4,
                 "beta_end": 0.03, "num_train_timesteps": 500, "prediction_type": "v_prediction"}  # fmt: skip
    (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(scheduler))
    names = {str(i): f"name{i}, other" for i in range(10)}
    (root / "model_index.json").write_text(json.dumps({"_class_name": "DiTPipeline", "id2label": names}))
    path = import_dit([root], None, tmp_path / "out", classes=[range(10)], preview_samples=2)
    expert = load_expert(path.parent / "expert_0", "cpu")
    assert expert.card.objective.name == "ddpm-v" and expert.card.objective.schedule.time_scale == 499.0
    assert expert.card.sample_space.class_names[:2] == ("name0", "name1")
    meta = json.loads((path.parent / "decoder" / "meta.json").read_text())
    assert meta["source"]["folder"] == str((root / "vae").resolve())
    with pytest.raises(ConfigError, match='beta_schedule "linear"'):
        objective_of({**scheduler, "beta_schedule": "scaled_linear"})
    with pytest.raises(ConfigError, match="prediction_type"):
        objective_of({**scheduler, "prediction_type": "flow"})


def test_moved_weights_are_refused_by_their_digest(imported, tmp_path):
    dit, deployment = imported
    copy = tmp_path / "copy"
    shutil.copytree(deployment.parent, copy)
    meta = json.loads((copy / "expert_0" / "meta.json").read_text())
    other = write_dit(tmp_path / "other", seed=5) / "diffusion_pytorch_model.safetensors"
    (copy / "expert_0" / "meta.json").write_text(json.dumps({**meta, "weights": str(other)}))
    with pytest.raises(ConfigError, match="sha256"):
        load_expert(copy / "expert_0", "cpu")


def test_the_bucketed_traced_path_answers_as_eager(imported, tmp_path, monkeypatch):
    """cpu-traced: the static-shape path Trainium takes (torch.jit.trace per bucket, the trace cache)."""
    monkeypatch.setenv("DDM_TRACE_CACHE_DIR", str(tmp_path / "traces"))
    _, deployment = imported
    folder = deployment.parent / "expert_0"
    x = np.random.default_rng(3).standard_normal((3, 4, 8, 8)).astype(np.float32)
    t, y = np.array([0.2, 0.6, 0.9], np.float32), np.array([1, 4, NULL])
    traced = load_expert(folder, "cpu-traced", buckets=(1, 4))
    assert traced.buckets == (1, 4)
    want = load_expert(folder, "cpu").velocity(x, t, y, 3.0)
    np.testing.assert_allclose(traced.velocity(x, t, y, 3.0), want, atol=1e-5)


# what a Transformer2DModel config (diffusers before DiT had its own class, as facebook/DiT-XL-2-256's)
# adds to a DiT's: keys a DiT leaves at these values
LEGACY_KEYS = {
    "cross_attention_dim": None, "num_vector_embeds": None, "only_cross_attention": False,
    "double_self_attention": False, "use_linear_projection": False, "attention_type": "default",
}  # fmt: skip


def test_a_transformer2dmodel_config_serves_as_diffusers_loads_it(imported, tmp_path):
    """diffusers remaps a Transformer2DModel config with norm_type ada_norm_zero to DiTTransformer2DModel
    (same tensor names): so does the import, and the expert answers as the modern folder's."""
    dit, deployment = imported
    legacy = tmp_path / "legacy"
    shutil.copytree(dit, legacy)
    config = json.loads((dit / "config.json").read_text())
    config = {**config, **LEGACY_KEYS, "_class_name": "Transformer2DModel"}
    (legacy / "config.json").write_text(json.dumps(config))
    from diffusers import DiTTransformer2DModel, Transformer2DModel

    loaded = Transformer2DModel.from_pretrained(str(legacy), use_safetensors=True, low_cpu_mem_usage=False)
    assert isinstance(loaded, DiTTransformer2DModel)  # diffusers' own reading of such a folder
    path = import_dit([legacy], imported_vae(deployment), tmp_path / "out", preview_samples=1)
    x = np.random.default_rng(4).standard_normal((2, 4, 8, 8)).astype(np.float32)
    t, y = np.array([0.3, 0.7], np.float32), np.array([2, 5])
    want = load_expert(deployment.parent / "expert_0", "cpu").velocity(x, t, y, 2.0)
    np.testing.assert_array_equal(load_expert(path.parent / "expert_0", "cpu").velocity(x, t, y, 2.0), want)
    (legacy / "config.json").write_text(json.dumps({**config, "cross_attention_dim": 64}))
    with pytest.raises(ConfigError, match="cross_attention_dim None"):
        import_dit([legacy], imported_vae(deployment), tmp_path / "out2")


def imported_vae(deployment):
    """The VAE folder an imported deployment's decoder serves."""
    return json.loads((deployment.parent / "decoder" / "meta.json").read_text())["source"]["folder"]
