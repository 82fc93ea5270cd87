"""Turn a Deployment (schema/deployment.py) into live objects: experts, a routing policy, and the
descriptor the router publishes (what a job on this deployment means).

The deployment is read once (read_deployment): each expert's meta.json and the decoder's card, checked
to agree, into one LoadedDeployment, from which the policy and the descriptor are derived. The
module-level helpers (load_policy, describe, expert_label_counts, ...) read it afresh on each call, for
callers that need one of them."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from ddm.router.policies import RoutingPolicy, build_policy
from ddm.schema.autoencoder_card import AutoencoderCard, DecoderInfo, split_latent_name
from ddm.schema.conditioning import Conditioning, check_encoder
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor, ExpertInfo
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.expert_card import ExpertCard, card_of
from ddm.schema.sample_space import SampleSpace
from ddm.schema.strategy import default_strategy
from ddm.workers.autoencoder.checkpoint import read_card
from ddm.workers.checkpoint import read_meta


def space_difference(a: ExpertCard, b: ExpertCard) -> str:
    """What differs between two experts' sample spaces and conditioning ('' when nothing). A card derived
    for an old checkpoint (no card in its meta) declares no class names of its own: names are then not
    compared, only shape, value range and the number of classes."""
    space_a, space_b = a.sample_space, b.sample_space
    if (a.derived or b.derived) and space_a.num_classes == space_b.num_classes:
        space_b = dataclasses.replace(space_b, class_names=space_a.class_names)
    return space_a.describe_difference(space_b)


@dataclasses.dataclass(frozen=True)
class LoadedDeployment:
    """A deployment with what its files say, read once and checked (weights untouched): each expert's
    meta.json and card, the label counts, the decoder's card."""

    deployment: Deployment
    metas: dict[int, dict]  # expert id -> its meta.json
    cards: dict[int, ExpertCard]
    label_counts: np.ndarray  # int64 [E, K], in the order of deployment.experts
    decoder: AutoencoderCard | None

    def policy(self) -> RoutingPolicy:
        return _policy(self.deployment, self.label_counts)

    def describe(self, policy: RoutingPolicy, router_id: str) -> DeploymentDescriptor:
        return _descriptor(self, policy, router_id)


def read_deployment(deployment: Deployment) -> LoadedDeployment:
    """Read every expert's meta.json once and the decoder's card; ConfigError when they disagree (one
    sample space and conditioning, the deployment's; the decoder reads it; label counts present)."""
    metas = {e.id: read_meta(e.checkpoint) for e in deployment.experts}
    cards = _checked_cards(deployment, metas)
    decoder = decoder_card(deployment, cards)
    return LoadedDeployment(deployment, metas, cards, _label_counts(deployment, metas), decoder)


def expert_cards(deployment: Deployment) -> dict[int, ExpertCard]:
    """Each expert's card (schema/expert_card.py), read from its meta.json (weights untouched), checked
    to agree: one sample space and one conditioning for the whole deployment, as many classes as the
    deployment names. ConfigError naming both experts and the difference otherwise."""
    return read_deployment(deployment).cards


def _checked_cards(deployment: Deployment, metas: dict[int, dict]) -> dict[int, ExpertCard]:
    entries = {e.id: e for e in deployment.experts}
    cards = {k: card_of(metas[k], f"{e.checkpoint}/meta.json") for k, e in entries.items()}
    if not cards:
        return cards
    first = next(iter(cards))
    for k, card in cards.items():
        if difference := space_difference(cards[first], card):
            raise ConfigError(
                f"{deployment.path}: experts {first} ({entries[first].checkpoint}) and {k} "
                f"({entries[k].checkpoint}) declare different sample spaces: {difference} "
                "(a deployment serves one sample space)"
            )
    for k, card in cards.items():
        if difference := deployment_difference(deployment, card):
            raise ConfigError(
                f"{deployment.path}: expert {k} ({entries[k].checkpoint}) declares the sample space "
                f"{card.sample_space.describe()}, not the deployment's {deployment.sample_space.describe()} "
                f"({difference}: the expert's first); a deployment's [sample_space] must be its experts'"
            )
        try:  # a text expert reads what the deployment's encoder writes: the same digest, width, form
            check_encoder(card.conditioning, deployment.conditioning)
        except SchemaError as exc:
            raise ConfigError(f"{deployment.path}: expert {k} ({entries[k].checkpoint}): {exc}") from None
    return cards


def decoder_card(
    deployment: Deployment, cards: dict[int, ExpertCard] | None = None
) -> AutoencoderCard | None:
    """The decoder's card of a latent deployment (None without [decoder]), checked: its latent space is
    the deployment's sample space, and every expert trained on latents was trained on this encoder's.
    An expert trained on latents in a deployment without a decoder is refused too (its results would
    never become pictures). ConfigError naming both sides otherwise."""
    entries = {e.id: e for e in deployment.experts}
    encoders = {}
    for k, e in entries.items():
        card = cards[k] if cards else card_of(read_meta(e.checkpoint), f"{e.checkpoint}/meta.json")
        latent = split_latent_name(str(card.trained_on.partition.get("dataset", "")))
        if latent is not None:
            encoders[k] = latent[1]
    if deployment.decoder is None:
        if encoders:
            k, enc = next(iter(encoders.items()))
            raise ConfigError(
                f"{deployment.path}: expert {k} ({entries[k].checkpoint}) was trained on {enc} latents, and "
                "the deployment has no [decoder] to turn them into pictures (add one: checkpoint = the "
                "autoencoder folder)"
            )
        return None
    folder = deployment.decoder.checkpoint
    card = read_card(folder)
    ours = deployment.sample_space
    if difference := card.latent_space().describe_difference(  # the latent's shape and range; not classes
        SampleSpace(ours.shape, ours.value_range, card.pixel_space.num_classes, card.pixel_space.class_names)
    ):
        raise ConfigError(
            f"{deployment.path}: the decoder {folder} reads {card.describe_latent()}, not the deployment's "
            f"sample space {deployment.sample_space.describe()} ({difference}: the decoder's first)"
        )
    for k, enc in encoders.items():
        if enc != card.encoder_id:
            raise ConfigError(
                f"{deployment.path}: expert {k} ({entries[k].checkpoint}) was trained on {enc} latents, but "
                f"the decoder {folder} is {card.encoder_id}: another latent space (encode with that "
                "autoencoder, or deploy this expert's)"
            )
    return card


def deployment_difference(deployment: Deployment, card: ExpertCard) -> str:
    """What differs between an expert's declared sample space and the deployment's ('' when nothing).
    Class names are compared only where both declare them: a derived card (an old checkpoint) names no
    classes of its own, and a file without [sample_space] names its classes for display only
    (Fashion-MNIST renames the digits)."""
    space, ours = card.sample_space, deployment.sample_space
    if (card.derived or not deployment.declared_space) and space.num_classes == ours.num_classes:
        space = dataclasses.replace(space, class_names=ours.class_names)
    return space.describe_difference(ours)


def card_summary(card: ExpertCard) -> dict:
    """The descriptor's summary of a card (schema/descriptor.py CARD_SUMMARY_FIELDS)."""
    schedule = card.objective.schedule
    return {
        "framework": card.framework,
        "architecture": card.architecture,
        "objective": card.objective.name,
        "schedule": schedule.to_dict() if schedule is not None else None,
        "time_convention": card.objective.time_convention,
    }


def expert_label_counts(deployment: Deployment) -> np.ndarray:
    """int64 [E, K]: each expert's training label counts over the deployment's K classes, read from its
    meta.json (weights untouched); [E, 0] for an unconditional space. Refuses experts whose sample
    spaces or conditioning differ (expert_cards)."""
    return read_deployment(deployment).label_counts


def _label_counts(deployment: Deployment, metas: dict[int, dict]) -> np.ndarray:
    k = deployment.sample_space.num_classes
    rows = []
    for entry in deployment.experts:
        meta = metas[entry.id]
        counts = [] if k == 0 else meta.get("label_counts")
        if not isinstance(counts, list) or len(counts) != k:
            raise ConfigError(f"{entry.checkpoint}/meta.json: expected label_counts, a list of {k} ints")
        rows.append(counts)
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), k)


def load_policy(deployment: Deployment) -> RoutingPolicy:
    return read_deployment(deployment).policy()


def _policy(deployment: Deployment, label_counts: np.ndarray) -> RoutingPolicy:
    learned = None
    if deployment.router.kind == "learned":
        learned = _load_learned(deployment.router.checkpoint)
        if difference := learned.cfg.check_space(deployment.sample_space):
            raise ConfigError(
                f"{deployment.path}: the learned router {deployment.router.checkpoint} reads another sample "
                f"space than the deployment's {deployment.sample_space.describe()}: {difference} (the "
                "router's first)"
            )
        if learned.cfg.text_width:
            _check_prompt_router(deployment, learned)
    return build_policy(deployment.router.kind, label_counts, learned)


def _load_learned(folder: Path):
    """A learned router's checkpoint: this system's (JAX, router/learned.py) or Paris's (PyTorch, as
    `ddm import paris` writes it: router/paris_router.py)."""
    from ddm.router.paris_router import ParisRouterPolicy, is_paris_router

    if is_paris_router(folder):
        return ParisRouterPolicy(folder)
    from ddm.router.learned import load_router

    return load_router(folder)


def _check_prompt_router(deployment: Deployment, learned) -> None:
    """A prompt-aware router reads the pooled embeddings of the deployment's own encoder: refused
    otherwise, naming what differs."""
    where = f"{deployment.path}: the learned router {deployment.router.checkpoint} reads prompts"
    text = deployment.conditioning.text
    if text is None or text.form != "pooled" or text.width != learned.cfg.text_width:
        raise ConfigError(
            f"{where} ({learned.cfg.text_width}-wide pooled embeddings): "
            + expected(
                "a text deployment with a pooled encoder of that width", deployment.conditioning.describe()
            )
        )
    try:
        check_encoder(
            Conditioning.from_dict(learned.meta.get("conditioning"), "router"), deployment.conditioning
        )
    except SchemaError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_experts(deployment: Deployment, device: str | None = None) -> dict:
    """All experts of a deployment, in-process, each at its entry's precision (device overrides each
    entry's device if given; a precision that device lacks is refused, not changed)."""
    from ddm.workers import load_expert

    expert_cards(deployment)  # one sample space, before any weights are loaded
    return {
        e.id: load_expert(e.checkpoint, device=device or e.device, precision=e.precision)
        for e in deployment.experts
    }


def describe(deployment: Deployment, policy: RoutingPolicy, router_id: str) -> DeploymentDescriptor:
    """The descriptor of `deployment` as served by `policy` (reads each expert's meta.json only).
    The router publishes it; `ddm sample --local` resolves its jobs with it too, so both agree."""
    return read_deployment(deployment).describe(policy, router_id)


def _descriptor(loaded: LoadedDeployment, policy: RoutingPolicy, router_id: str) -> DeploymentDescriptor:
    deployment, experts = loaded.deployment, []
    for entry, counts in zip(deployment.experts, loaded.label_counts, strict=True):
        meta = loaded.metas[entry.id]
        partition = meta.get("partition")
        cluster = partition.get("method", "?") if isinstance(partition, dict) else "?"
        labels = tuple(int(y) for y in np.flatnonzero(counts > 0))
        label_counts = tuple(int(c) for c in counts)
        card = card_summary(loaded.cards[entry.id])
        info = ExpertInfo(entry.id, meta["framework"], entry.device, labels, str(cluster), label_counts, card)
        experts.append(info)
    has_oracle = policy.oracle is not None
    return DeploymentDescriptor(
        name=deployment.name,
        router_kind=deployment.router.kind,
        experts=tuple(experts),
        strategies=policy.strategies(),
        default_strategy=deployment.strategy or default_strategy(has_oracle),
        default_guidance=deployment.guidance,
        default_on_expert_loss=deployment.on_expert_loss,
        class_names=deployment.class_names,
        router_id=router_id,
        published_at=round(time.time(), 3),
        sampling=deployment.sampling,
        sample_space=deployment.sample_space,
        decoder=DecoderInfo.of(loaded.decoder) if loaded.decoder is not None else None,
        conditioning=deployment.conditioning,
        example_prompts=deployment.example_prompts,
    )


def load_decoder(deployment: Deployment, device: str | None = None):
    """The deployment's decoder in-process (a LoadedAutoencoder), None without one; checked first."""
    if decoder_card(deployment) is None:
        return None
    from ddm.workers.autoencoder.checkpoint import load_autoencoder

    return load_autoencoder(deployment.decoder.checkpoint, device or deployment.decoder.device)
