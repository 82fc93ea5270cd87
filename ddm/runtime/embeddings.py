"""Prompt embeddings where every stage can reach them: Redis, one key per (encoder, prompt).

A text job's router asks the text encoder once, when the job starts, and stores what it answers here
(`put`); the experts read it by the 16-byte key each request row carries (`get`, through a small
in-process cache: a job's rows carry the same two keys at every step), so a request row grows by 32
bytes, not by an embedding. The values are msgpack arrays (schema/codec.py: never pickle), written
with the job TTL and refreshed by every job that uses them.

A key that is missing here (Redis lost it, or it expired) is not guessed at: the expert refuses the
request naming the key, and a router that resumes a job whose embeddings are gone asks the encoder
again (router/worker_text.py).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ddm.schema.codec import packb, unpackb
from ddm.schema.names import Names

CACHE_ENTRIES = 256  # embeddings an expert keeps in memory: at 384 floats each, under 0.5 MB


class EmbeddingStore:
    def __init__(self, redis, names: Names, ttl_s: int, cache_entries: int = CACHE_ENTRIES):
        self.redis = redis
        self.names = names
        self.ttl_s = ttl_s
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._cache_entries = cache_entries

    def put(self, keys: list[bytes], embeddings: np.ndarray) -> None:
        """Store one embedding per key (float32; [N, ...] in key order), with the TTL, in one round trip."""
        with self.redis.pipeline(transaction=False) as pipe:
            for key, embedding in zip(keys, embeddings, strict=True):
                pipe.set(
                    self.names.text_embedding(key.hex()),
                    packb(np.ascontiguousarray(embedding)),
                    ex=self.ttl_s,
                )
            pipe.execute()

    def missing(self, keys: list[bytes]) -> list[bytes]:
        """The keys whose embeddings are not stored (their TTL refreshed where they are)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.expire(self.names.text_embedding(key.hex()), self.ttl_s)
            found = pipe.execute()
        return [key for key, ok in zip(keys, found, strict=True) if not ok]

    def get(self, keys: list[bytes]) -> list[np.ndarray | None]:
        """The embeddings of `keys` (None where none is stored), from the cache or Redis."""
        out: dict[bytes, np.ndarray | None] = {}
        wanted = []
        for key in dict.fromkeys(keys):
            if key in self._cache:
                self._cache.move_to_end(key)
                out[key] = self._cache[key]
            else:
                wanted.append(key)
        if wanted:
            values = self.redis.mget([self.names.text_embedding(k.hex()) for k in wanted])
            for key, value in zip(wanted, values, strict=True):
                out[key] = None if value is None else self._remember(key, _array(value))
        return [out[key] for key in keys]

    def _remember(self, key: bytes, embedding: np.ndarray) -> np.ndarray:
        self._cache[key] = embedding
        while len(self._cache) > self._cache_entries:
            self._cache.popitem(last=False)
        return embedding


def _array(value: bytes) -> np.ndarray:
    embedding = unpackb(value)
    if not isinstance(embedding, np.ndarray) or embedding.dtype != np.float32:
        raise ValueError(f"a stored embedding should be a float32 array, not {type(embedding).__name__}")
    return embedding
