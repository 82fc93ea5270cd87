"""A text job's rows carry two 16-byte keys each (its prompt's embedding, and the embedding guidance
steers away from: the negative or the empty prompt), never the embeddings themselves; this turns keys
into what a text expert reads, for the expert worker (keys looked up in Redis through
ddm/runtime/embeddings.py) and for the in-process sampler (a dict of the job's own encodings) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ddm.schema.errors import SchemaError
from ddm.schema.text_messages import embedding_key

# keys -> their embeddings, None where one is not stored (EmbeddingStore.get, or a dict's)
Lookup = Callable[[Sequence[bytes]], Sequence[np.ndarray | None]]


def embedding_rows(text_keys: np.ndarray, lookup: Lookup) -> tuple[np.ndarray, np.ndarray]:
    """(cond, uncond): float32 [B, ...] each, from text_keys uint8 [B, 2, KEY_BYTES]. SchemaError naming
    the first key that is not stored (Redis lost it, or it expired: the router encodes it again when it
    resumes the job)."""
    flat = [bytes(k) for k in text_keys.reshape(-1, text_keys.shape[-1])]
    found = dict(zip(flat, lookup(flat), strict=True))
    missing = [k for k, v in found.items() if v is None]
    if missing:
        raise SchemaError(f"the prompt embedding {missing[0].hex()} is not stored (ddm:text:<key> in Redis)")
    pairs = np.stack([found[k] for k in flat]).reshape(*text_keys.shape[:2], *found[flat[0]].shape)
    return pairs[:, 0], pairs[:, 1]


def dict_lookup(embeddings: dict[bytes, np.ndarray]) -> Lookup:
    """A Lookup over embeddings held in memory (the in-process sampler's)."""
    return lambda keys: [embeddings.get(k) for k in keys]


def with_text(velocity, lookup: Lookup):
    """A VelocityFn (router/sampler.py) over Expert.velocity that turns a text job's keys into cond and
    uncond; a class job's calls (four arguments) pass through unchanged."""

    def fn(x, t, y, g, text_keys=None):
        if text_keys is None:
            return velocity(x, t, y, g)
        cond, uncond = embedding_rows(text_keys, lookup)
        return velocity(x, t, y, g, cond=cond, uncond=uncond)

    return fn


def text_embeddings(expert, conditioning, settings):
    """A text deployment's expert worker: check that the expert reads what the deployment's encoder
    writes (its card's encoder digest and width), and open the embeddings it will read (Redis)."""
    from ddm.runtime.embeddings import EmbeddingStore
    from ddm.runtime.redis_conn import redis_client
    from ddm.schema.conditioning import check_encoder
    from ddm.schema.errors import ConfigError

    try:
        check_encoder(expert.card.conditioning, conditioning)
    except SchemaError as exc:
        raise ConfigError(f"{expert.meta.path}: {exc}") from None
    return EmbeddingStore(redis_client(settings.redis_url), settings.names, settings.job_ttl_s)


def local_lookup(spec, prompts: Sequence[str], encoder=None, source=None) -> tuple[Lookup, list[bool]]:
    """The in-process sampler's lookup: `prompts` encoded here by the encoder `spec` names (a
    TextEncoderSpec; ConfigError if the weights found are other ones), keyed as the router keys
    them; and which prompts were cut to the token limit. encoder: one already loaded (or a file of
    stored embeddings, ddm.workers.stored_prompts), whose spec must be `spec`; else the one loaded from
    `source`, the deployment's [text_encoder] entry (None: the wheel's), as the text-encoder stage does."""
    from ddm.workers.text_encoder import load_deployment_encoder

    if encoder is not None and encoder.spec != spec:
        raise SchemaError(f"expected the deployment's text encoder {spec}, got {encoder.spec}")
    encoder = encoder if encoder is not None else load_deployment_encoder(spec, source)
    embeddings, truncated = encoder.encode(list(prompts))
    stored = {embedding_key(spec, p): e for p, e in zip(prompts, embeddings, strict=True)}
    return dict_lookup(stored), list(truncated)


class LocalJob(NamedTuple):
    """What the in-process sampler needs of a resolved job beside the job (job_velocities)."""

    velocities: dict  # expert id -> VelocityFn
    truncated: list[bool]  # which prompts were cut to the token limit
    prompt: np.ndarray | None  # a text job's prompt embedding: what a prompt-aware router reads


def job_velocities(velocities: dict, job, encoder=None, source=None) -> LocalJob:
    """The in-process sampler's VelocityFns for a resolved job: a text job's read its prompts' embeddings,
    encoded here once (local_lookup, by `encoder` when given, else from `source`: the deployment's
    [text_encoder] entry); a class job's are `velocities` as given."""
    if job.text is None:
        return LocalJob(velocities, [], None)
    lookup, truncated = local_lookup(job.text, job.prompts, encoder, source)
    [prompt] = lookup([embedding_key(job.text, job.prompts[0])])
    return LocalJob({k: with_text(f, lookup) for k, f in velocities.items()}, truncated, prompt)
