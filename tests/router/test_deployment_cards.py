"""A deployment serves one sample space: experts whose cards declare different ones are refused at
load, naming both experts and the difference (router/deployment_loader.py expert_cards)."""

from __future__ import annotations

import pytest

from ddm.router.deployment_loader import expert_cards, expert_label_counts, load_experts
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.checkpoint import expert_meta
from ddm.workers.frameworks import FRAMEWORKS

PARTITION = {"id": "cards", "dataset": "synthetic", "split": "none"}
FASHION = ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot")


def checkpoint(folder, space=None, classes=range(10)):
    counts = [5 if c in classes else 0 for c in range(space.num_classes if space else 10)]
    meta = expert_meta("torch", "tiny", 0, PARTITION, counts, **({"sample_space": space} if space else {}))
    if space is None:
        meta.pop("card")  # an old checkpoint: no card
    else:  # a model sized for its space
        c, h, _ = space.shape
        meta["config"] = {
            **meta["config"],
            "num_classes": space.num_classes,
            "in_channels": c,
            "image_size": h,
        }
    write_meta(folder, meta)
    (folder / FRAMEWORKS["torch"].weights_file).write_bytes(b"")
    return folder.name


def deployment(tmp_path, *spaces) -> Deployment:
    names = [checkpoint(tmp_path / f"e{k}", space, range(5 * k, 5 * k + 5)) for k, space in enumerate(spaces)]
    path = Deployment.build(tmp_path / "deployment.toml", [(n, "cpu") for n in names], "oracle").write()
    return Deployment.load(path)


def test_experts_in_one_space_load(tmp_path):
    cards = expert_cards(deployment(tmp_path, LEGACY, LEGACY))
    assert [c.sample_space for c in cards.values()] == [LEGACY, LEGACY]


def test_old_checkpoints_and_declared_names_mix(tmp_path):
    """An old checkpoint's derived card declares no names of its own; the declared ones are not held
    against it (Fashion-MNIST experts trained before cards beside one trained after)."""
    fashion = SampleSpace((1, 32, 32), num_classes=10, class_names=FASHION)
    cards = expert_cards(deployment(tmp_path, None, fashion))
    assert cards[0].derived and not cards[1].derived


@pytest.mark.parametrize(
    "other, difference",
    [
        (SampleSpace((1, 32, 32), num_classes=10, class_names=FASHION), "class_names differ at label 0"),
        (
            SampleSpace((1, 32, 32), (0.0, 1.0), 10, LEGACY.class_names),
            r"value_range \[-1.0, 1.0\] vs \[0.0, 1.0\]",
        ),
    ],
)
def test_experts_in_different_spaces_are_refused_naming_both(tmp_path, other, difference):
    d = deployment(tmp_path, LEGACY, other)
    for load in (expert_cards, expert_label_counts, load_experts):
        with pytest.raises(ConfigError, match=rf"experts 0 \(.*e0\) and 1 \(.*e1\) .*{difference}"):
            load(d)


def test_experts_with_another_class_count_than_the_deployment_are_refused(tmp_path):
    unconditional = SampleSpace((1, 32, 32))
    with pytest.raises(ConfigError, match=r"expert 0 \(.*e0\) declares .*unconditional.*num_classes 0 vs 10"):
        expert_cards(deployment(tmp_path, unconditional, unconditional))


RGB = SampleSpace((3, 16, 16), num_classes=3, class_names=("red", "green", "blue"))


def declared(tmp_path, card_space, file_space) -> Deployment:
    names = [checkpoint(tmp_path / f"e{k}", card_space, range(3)) for k in range(2)]
    path = Deployment.build(
        tmp_path / "deployment.toml", [(n, "cpu") for n in names], "label-prior", sample_space=file_space
    ).write()
    return Deployment.load(path)


def test_a_declared_space_equal_to_the_cards_serves_and_is_published(tmp_path):
    from ddm.router.deployment_loader import describe, load_policy

    d = declared(tmp_path, RGB, RGB)
    assert d.sample_space == RGB and d.class_names == RGB.class_names and d.declared_space
    assert "[sample_space]" in d.path.read_text()
    descriptor = describe(d, load_policy(d), "w-router")
    assert descriptor.sample_space == RGB and descriptor.class_names == RGB.class_names
    assert descriptor.experts[0].card == {
        "framework": "torch",
        "architecture": "unet",
        "objective": "flow-velocity",
        "schedule": None,
        "time_convention": "t0-noise",
    }


@pytest.mark.parametrize(
    ("file_space", "difference"),
    [
        (None, "shape 3x16x16 vs 1x32x32"),  # no [sample_space]: the legacy space
        (SampleSpace((3, 32, 32), num_classes=3, class_names=RGB.class_names), "shape 3x16x16 vs 3x32x32"),
        (
            SampleSpace((3, 16, 16), num_classes=3, class_names=("r", "g", "b")),
            "class_names differ at label 0",
        ),
    ],
)
def test_a_declared_space_other_than_the_cards_is_refused_naming_the_expert(tmp_path, file_space, difference):
    with pytest.raises(ConfigError, match=rf"expert 0 \(.*e0\) declares .*{difference}"):
        expert_cards(declared(tmp_path, RGB, file_space))


def test_the_router_reads_each_meta_json_once(tmp_path, monkeypatch):
    """The deployment is read once into one value, from which the policy and the descriptor come (issue
    41: a router start read each meta.json 6 times and checked the cards 3 times)."""
    import ddm.router.deployment_loader as loader
    from ddm.router.worker import RouterWorker
    from ddm.schema.settings import Settings

    dep = deployment(tmp_path, None, None)
    reads = []
    real = loader.read_meta
    monkeypatch.setattr(loader, "read_meta", lambda folder: reads.append(folder) or real(folder))
    router = RouterWorker(Settings(), dep.path, worker_id="reads-once")
    try:
        assert sorted(reads) == sorted(e.checkpoint for e in dep.experts), reads
        assert len(router.descriptor.experts) == 2 and router.policy.oracle is not None
    finally:
        router.store.r.close()
