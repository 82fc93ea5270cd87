"""Random-weight experts and deployments: real checkpoint folders (weights, meta.json) that need no
training. Tests use them, and `ddm bench --preset P` times a preset the repo ships no checkpoint of
(the cost of a forward pass does not depend on the values of the weights)."""

from __future__ import annotations

from pathlib import Path

from ddm.schema.checkpoint_meta import file_sha256, write_meta
from ddm.schema.deployment import Deployment
from ddm.schema.expert_card import stamp_card
from ddm.schema.sample_space import LEGACY, SampleSpace

# what stands for a partition manifest: a random expert learnt from no data
RANDOM_PARTITION = {"id": "test", "dataset": "synthetic", "split": "none"}


def make_random_expert(
    folder: Path,
    framework: str,
    classes,
    preset: str = "tiny",
    seed: int = 0,
    architecture: str = "unet",
    sample_space: SampleSpace = LEGACY,
    conditioning=None,
) -> Path:
    """A checkpoint folder with random (not trained) weights, O(1) outputs, and a real meta.json.
    architecture: a name in ddm.workers.architectures; sample_space: what its card declares and its
    model is sized for (channels, square size, classes; default the legacy 1x32x32, 10 classes);
    conditioning: a text expert's (a Conditioning of kind text, pooled), None for class labels."""
    import torch

    from ddm.workers.architectures import expert_architecture
    from ddm.workers.checkpoint import config_of, expert_meta
    from ddm.workers.frameworks import expert_framework

    target = expert_framework(framework)
    counts = [100 if c in classes else 0 for c in range(sample_space.num_classes)]
    meta = expert_meta(
        framework,
        preset,
        0,
        RANDOM_PARTITION,
        counts,
        steps=0,
        architecture=architecture,
        sample_space=sample_space,
        conditioning=conditioning,
    )
    cfg = config_of(meta)
    # The canonical layout is the architecture's PyTorch state_dict: every framework's weights start there.
    torch.manual_seed(seed)
    model = expert_architecture(architecture).build("torch", cfg)
    for p in model.parameters():  # output layers are zero-initialised; give every weight a real value
        torch.nn.init.normal_(p, std=0.04)
    canonical = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    folder.mkdir(parents=True, exist_ok=True)
    target.save_canonical(folder, canonical, cfg)
    write_meta(folder, stamp_card(meta, file_sha256(folder / target.weights_file)))  # card with its digest
    return folder


def write_label_split(folder: Path, preset: str, device: str = "cpu") -> Path:
    """The shipped demo's shape with random weights: expert 0 (digits 0-4) in PyTorch, expert 1 (5-9)
    in JAX/Flax, oracle routing. Returns the deployment.toml path."""
    make_random_expert(folder / "expert0_torch", "torch", range(0, 5), preset=preset, seed=0)
    make_random_expert(folder / "expert1_jax", "jax", range(5, 10), preset=preset, seed=1)
    experts = [("expert0_torch", device), ("expert1_jax", device)]
    return Deployment.build(folder / "deployment.toml", experts, "oracle", name="test").write()
