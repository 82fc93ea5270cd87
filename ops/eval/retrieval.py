"""R-precision for text-to-image: does an image show what its prompt says? An image tower trained here
(the evaluation classifier's CNN with a projection to the text width, ops/eval/classifier.py) is fitted
contrastively against the FROZEN pooled prompt embeddings of the train split's captions (symmetric
InfoNCE over a batch, one caption variant drawn per image per step). R-precision then asks, for each
image and its prompt, whether the prompt scores highest among itself and R - 1 prompts of other images
(AttnGAN's measure, R = 100). Its ceiling is the R-precision of real held-out images with their own
captions: a generated image can do as well as a real one, not better.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file

from ddm.ops.eval.classifier import Classifier, augment, fit_epochs
from ddm.schema.checkpoint_meta import read_meta, utc_now, write_meta
from ddm.schema.errors import ConfigError, expected
from ddm.workers.text_conditions import PromptTable
from ddm.workers.training import FitOptions

WEIGHTS = "model.safetensors"
CANDIDATES = 100  # R: the prompt and 99 others
TEMPERATURE = 0.07  # of the InfoNCE logits (CLIP's initial value)
IMAGE_TOWER_FIT = FitOptions(epochs=40, batch=128)  # train_image_tower's default


def fit_image_tower(images: np.ndarray, table: PromptTable, fit: FitOptions) -> Classifier:
    """images f32 [N,C,S,S]; table row i: image i's prompts -> a network whose output f32 [B, width]
    points (after L2 normalisation) at its image's prompt embeddings."""
    torch.manual_seed(fit.seed)
    model = Classifier(images.shape[1], table.width, images.shape[2])
    keep = np.zeros(fit.batch, bool)  # no prompt dropped: every image is matched to one of its captions

    def loss(idx: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        text = F.normalize(torch.from_numpy(table.pick(idx, keep[: len(idx)], rng)), dim=1)
        image = F.normalize(model(torch.from_numpy(augment(images[idx], rng))), dim=1)
        logits = image @ text.T / TEMPERATURE
        target = torch.arange(len(idx))
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2

    fit_epochs(model, loss, len(images), fit, "image tower")
    return model.eval()


@torch.inference_mode()
def embed_images(model: Classifier, x: np.ndarray, batch: int = 256) -> np.ndarray:
    """L2-normalised image embeddings f32 [N, width]."""
    out = [
        F.normalize(model(torch.from_numpy(x[s : s + batch])), dim=1).numpy() for s in range(0, len(x), batch)
    ]
    return np.concatenate(out)


def r_precision_hits(
    image_embeddings: np.ndarray,
    prompts: list[str],
    embeddings: np.ndarray,
    seed: int = 0,
    pool: tuple[list[str], np.ndarray] | None = None,
) -> np.ndarray:
    """bool [N]: image i's prompt scores highest among it and CANDIDATES - 1 prompts drawn from the
    other DISTINCT prompts of the pool (fewer when it has fewer). embeddings f32 [N, width]: row i is
    prompts[i]'s embedding. pool: (prompts, their embeddings) to draw from (None: the set's own), so
    a sample of a split's prompts is scored against the same candidates as the whole split."""
    rng = np.random.default_rng(seed)
    pool_prompts, pool_embeddings = pool if pool is not None else (prompts, embeddings)
    distinct = {p: i for i, p in enumerate(pool_prompts)}  # one row per distinct prompt
    rows = np.fromiter(distinct.values(), np.int64)
    own = _unit(embeddings)
    candidates = _unit(pool_embeddings)
    hits = np.zeros(len(prompts), bool)
    for i, prompt in enumerate(prompts):
        others = rows[[p != prompt for p in distinct]]
        drawn = rng.choice(others, min(CANDIDATES - 1, len(others)), replace=False)
        mine = own[i] @ image_embeddings[i]
        hits[i] = mine > (candidates[drawn] @ image_embeddings[i]).max(initial=-np.inf)
    return hits


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True).clip(1e-12)


def train_image_tower(
    train_images: np.ndarray,
    table: PromptTable,
    real: dict[str, tuple[np.ndarray, list[str], np.ndarray]],
    out_dir: Path,
    record: dict,
    *,
    fit: FitOptions = IMAGE_TOWER_FIT,
) -> dict:
    """Fit the tower on the train split's images and prompts, then measure the ceilings: R-precision of
    each split of `real` (name -> real images, their prompts, the prompts' embeddings). A checkpoint in
    out_dir; meta.json has the ceilings."""
    t0 = time.perf_counter()
    model = fit_image_tower(train_images, table, fit)
    ceilings = {
        name: float(r_precision_hits(embed_images(model, images), prompts, embeddings).mean())
        for name, (images, prompts, embeddings) in real.items()
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.numpy().copy() for k, v in model.state_dict().items()}, str(out_dir / WEIGHTS))
    meta = {
        "kind": "retrieval",
        "framework": "torch",
        **record,
        "encoder": table.spec.to_dict(),
        "created": utc_now(),
        **fit.record(),  # epochs, batch, lr
        "candidates": CANDIDATES,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "ceiling_r_precision": ceilings,  # split -> R-precision of its real images
        "num_images": {name: len(prompts) for name, (_, prompts, _) in real.items()},
        **model.shape,  # in_channels, num_classes (here: the text width), image_size
    }
    write_meta(out_dir, meta)
    return meta


def load_image_tower(path: str | Path) -> tuple[Classifier, dict]:
    path = Path(path)
    meta = read_meta(path, kind="retrieval")
    if not (path / WEIGHTS).is_file():
        raise ConfigError(expected(f"an image tower (meta.json + {WEIGHTS}) at {path}", "missing files"))
    model = Classifier(**{k: int(meta[k]) for k in ("in_channels", "num_classes", "image_size")})
    model.load_state_dict({k: torch.from_numpy(v) for k, v in load_file(str(path / WEIGHTS)).items()})
    return model.eval(), meta
