"""R-precision's measure and its image tower (ops/eval/retrieval.py)."""

from __future__ import annotations

import numpy as np

from ddm.ops.eval.retrieval import CANDIDATES, embed_images, fit_image_tower, r_precision_hits
from ddm.schema.conditioning import TextEncoderSpec
from ddm.workers.text_conditions import PromptTable
from ddm.workers.training import FitOptions


def _prompts(n: int, width: int, seed: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n, width)).astype(np.float32)
    return [f"prompt {i}" for i in range(n)], e / np.linalg.norm(e, axis=1, keepdims=True)


def test_r_precision_is_one_for_an_image_that_is_its_prompt_and_chance_for_noise():
    prompts, embeddings = _prompts(300, 16, 0)
    assert r_precision_hits(embeddings, prompts, embeddings).all()
    noise = _prompts(300, 16, 1)[1]
    assert r_precision_hits(noise, prompts, embeddings).mean() < 5 / CANDIDATES  # chance: 1 in 100


def test_the_tower_learns_which_colour_goes_with_which_prompt():
    """Four prompts, each drawn as its own colour: after training, held-out drawings of each colour
    retrieve their prompt against the three others."""
    prompts, embeddings = _prompts(4, 8, 2)
    colours = np.array([[1, -1, -1], [-1, 1, -1], [-1, -1, 1], [1, 1, -1]], np.float32)
    rng = np.random.default_rng(3)

    def draw(labels):
        base = colours[labels][:, :, None, None] * np.ones((1, 1, 8, 8), np.float32)
        return (base + 0.2 * rng.standard_normal(base.shape)).astype(np.float32)

    labels = rng.integers(0, 4, 256)
    spec = TextEncoderSpec("test/enc", "0" * 64, "wordpiece", 8, 8, "pooled")
    table = PromptTable(
        np.concatenate([np.zeros((1, 8), np.float32), embeddings]),
        np.arange(257, dtype=np.int64),
        labels + 1,
        spec,
    )
    model = fit_image_tower(draw(labels), table, FitOptions(epochs=6, batch=32, lr=3e-3, progress=False))
    held = rng.integers(0, 4, 64)
    hits = r_precision_hits(embed_images(model, draw(held)), [prompts[k] for k in held], embeddings[held])
    assert hits.mean() > 0.9
