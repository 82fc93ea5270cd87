"""Train the learned router: cross-entropy on the manifest's cluster ids with x_t noised by the
schema's convention (DDM paper, Algorithm 1), then measure accuracy as a function of t."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization
from tqdm import tqdm

from ddm.router.learned import WEIGHTS, init_router_params
from ddm.router.router_net import RouterConfig, RouterNet
from ddm.schema.checkpoint_meta import read_meta, write_meta
from ddm.schema.flow import NULL_CLASS, interpolate
from ddm.workers.text_conditions import PromptTable
from ddm.workers.training import FitOptions

T_BINS = 10
ROUTER_FIT = FitOptions(steps=1500, batch=128)  # train_router's default


def router_batch(
    images: np.ndarray,
    labels: np.ndarray,
    clusters: np.ndarray,
    batch: int,
    seed: int,
    step: int,
    label_dropout: float,
    null_class: int = NULL_CLASS,
    text: PromptTable | None = None,
):
    """x_t f32 [B,C,H,W], t f32 [B], y i64 [B] (null_class where dropped), cluster i64 [B]; a pure
    function of (seed, step). With `text` (row i: image i's prompts) y is f32 [B, width] instead: one of
    the image's prompt embeddings per row, the empty prompt's where dropped (label_dropout 1: always,
    an x_t-only router on the same footing)."""
    rng = np.random.default_rng([seed, step, 7])
    idx = rng.integers(0, len(images), size=batch)
    x1 = images[idx]
    x0 = rng.standard_normal(x1.shape, dtype=np.float32)
    t = rng.random(batch, dtype=np.float32)
    drop = rng.random(batch) < label_dropout
    if text is not None:
        y = text.pick(idx, drop, rng)
    else:
        y = np.where(drop, null_class, labels[idx]).astype(np.int64)
    return interpolate(x0, x1, t).astype(np.float32), t, y, clusters[idx]


def train_router(
    images: np.ndarray,
    labels: np.ndarray,
    clusters: np.ndarray,
    cfg: RouterConfig,
    out_dir: Path,
    meta: dict,
    *,
    fit: FitOptions = ROUTER_FIT,
    label_dropout: float = 0.1,
    text: PromptTable | None = None,
) -> dict:
    """images f32 [N,C,H,W] (cfg's sample shape), labels i64 [N], clusters i64 [N] -> checkpoint in
    out_dir; returns meta. With `text` (cfg.text_width its width) the router reads the prompts."""
    steps, batch, lr, seed = fit.length("steps"), fit.batch, fit.lr, fit.seed
    model = RouterNet(cfg)
    params = init_router_params(model, seed)
    tx = optax.adamw(
        optax.warmup_cosine_decay_schedule(0.0, lr, min(100, steps // 5), steps, lr * 0.05), weight_decay=1e-4
    )
    opt = tx.init(params)
    step_fn = jax.jit(partial(_step, model, tx))
    t0 = time.perf_counter()
    recent: list[float] = []
    bar = tqdm(range(steps), desc="router", disable=not fit.progress)
    for step in bar:
        x_t, t, y, k = router_batch(
            images, labels, clusters, batch, seed, step, label_dropout, cfg.num_classes, text
        )
        params, opt, loss = step_fn(params, opt, jnp.asarray(x_t.transpose(0, 2, 3, 1)), t, y, k)
        recent = (recent + [float(loss)])[-100:]
        bar.set_postfix(loss=f"{np.mean(recent):.4f}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / WEIGHTS).write_bytes(serialization.to_bytes(jax.device_get(params)))
    final = {
        **meta,
        "kind": "router",
        "framework": "jax",
        "config": cfg.to_dict(),
        **fit.record(),  # steps, batch, lr
        "label_dropout": label_dropout,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "final_loss": float(np.mean(recent)),
        "num_params": int(sum(np.size(p) for p in jax.tree_util.tree_leaves(params))),
    }
    write_meta(out_dir, final)
    return final


def _step(model, tx, params, opt, x_t, t, y, k):
    def loss_fn(p):
        logits = model.apply({"params": p}, x_t, t, y)
        return optax.softmax_cross_entropy_with_integer_labels(logits, k).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt = tx.update(grads, opt, params)
    return optax.apply_updates(params, updates), opt, loss


def accuracy_by_t(router, images: np.ndarray, y: np.ndarray, clusters: np.ndarray, seed: int = 1) -> dict:
    """Top-1 accuracy of router.probs(x_t, t, y) against the true clusters, in T_BINS equal bins of t.

    Every held-out image is noised once per bin (t drawn inside the bin), so each bin sees them all;
    y: what the router reads beside x_t, row for row (labels, the null class, prompt embeddings).
    Returns {"t_mid": [...], "accuracy": [...], "n": N}.
    """
    rng = np.random.default_rng(seed)
    mids, accs = [], []
    for b in range(T_BINS):
        lo, hi = b / T_BINS, (b + 1) / T_BINS
        t = rng.uniform(lo, hi, len(images)).astype(np.float32)
        x0 = rng.standard_normal(images.shape, dtype=np.float32)
        x_t = interpolate(x0, images, t).astype(np.float32)
        pred = np.concatenate(
            [
                router.probs(x_t[s : s + 64], t[s : s + 64], y[s : s + 64]).argmax(1)
                for s in range(0, len(x_t), 64)
            ]
        )
        mids.append((lo + hi) / 2)
        accs.append(float((pred == clusters).mean()))
    return {"t_mid": mids, "accuracy": accs, "n": int(len(images))}


def plot_accuracy(curves: dict[str, dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    for name, c in curves.items():
        ax.plot(c["t_mid"], c["accuracy"], marker="o", label=name)
    ax.set_xlabel("t (0 = noise, 1 = data)")
    ax.set_ylabel("router top-1 accuracy")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def save_eval(out_dir: Path, curves: dict[str, dict]) -> None:
    meta = read_meta(out_dir, kind="router")
    write_meta(out_dir, {**meta, "accuracy_by_t": curves})


def class_conditions(labels: np.ndarray, null_class: int) -> dict[str, np.ndarray]:
    """A class router's two readings of held-out images: with their labels, and with none."""
    return {"with label y": labels, "unconditional (y = null)": np.full(len(labels), null_class, np.int64)}


def evaluate_router(
    out_dir: Path, images: np.ndarray, conditions: dict[str, np.ndarray], clusters: np.ndarray, where: str
) -> dict[str, dict]:
    """Accuracy by t of the router trained in out_dir under each named condition (its y for every
    image: class_conditions, or prompt embeddings), on images f32 [N,C,H,W] whose true clusters are
    known; recorded in its meta.json and plotted beside it.

    where: what the images are (e.g. "held-out mnist test[8000:]"), written into each curve.
    """
    from ddm.router.learned import load_router

    router = load_router(out_dir)
    curves = {name: accuracy_by_t(router, images, y, clusters) for name, y in conditions.items()}
    for curve in curves.values():
        curve["data"] = where
    save_eval(out_dir, curves)
    plot_accuracy(curves, out_dir / "accuracy_by_t.png", f"router accuracy vs t - {where}")
    return curves
