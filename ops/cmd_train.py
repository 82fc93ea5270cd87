"""`ddm train expert`: train one expert alone on one cluster of a partition manifest."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError, expected
from ddm.workers.checkpoint import TRAIN_STATE_FILE
from ddm.workers.config import PRESETS, get_preset
from ddm.workers.training import TrainConfig, train_loop


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    p = sub.add_parser(
        "expert",
        help="train one expert on one cluster of a partition",
        description="Train one flow-matching expert on the samples of one cluster, in isolation. "
        "A monolith is the same command on a one-cluster manifest (ddm partition --by all).",
    )
    p.add_argument("--framework", choices=("torch", "jax"), required=True)
    p.add_argument("--partition", required=True, type=Path, help="manifest JSON from `ddm partition`")
    p.add_argument("--expert", required=True, type=int, help="cluster id in the manifest")
    p.add_argument("--preset", default="small", choices=sorted(PRESETS), help="UNet size (default: small)")
    p.add_argument("--steps", type=int, default=TrainConfig.steps)
    p.add_argument("--batch", type=int, default=TrainConfig.batch)
    p.add_argument("--lr", type=float, default=TrainConfig.lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=TrainConfig.save_every, help="checkpoint period (steps)")
    p.add_argument("--device", default="cpu", help="torch: cpu or cuda (training on Neuron is not supported)")
    p.add_argument("--data-dir", default=None, help="dataset folder (default: $DDM_DATA_DIR or ./data)")
    p.add_argument("--out", required=True, type=Path, help="checkpoint folder")
    p.add_argument("--resume", action="store_true", help="continue the run already in --out")
    p.add_argument("--no-progress", action="store_true")

    r = sub.add_parser(
        "router",
        help="train the learned router p(cluster | x_t, t, y) on a partition",
        description="Train the JAX/Flax router with cross-entropy on the manifest's cluster ids (x_t noised "
        "by "
        "the flow convention), then report its accuracy as a function of t on held-out data (plot).",
    )
    r.add_argument("--partition", required=True, type=Path, help="manifest JSON from `ddm partition`")
    r.add_argument("--steps", type=int, default=1500)
    r.add_argument("--batch", type=int, default=128)
    r.add_argument("--lr", type=float, default=2e-3)
    r.add_argument("--channels", type=int, default=32, help="router width (default 32)")
    r.add_argument(
        "--label-dropout",
        type=float,
        default=0.5,
        help="share of samples shown with the null label, so the router also learns from x_t alone "
        "(with labels a label partition is trivial to route)",
    )
    r.add_argument("--seed", type=int, default=0)
    r.add_argument(
        "--eval-split", default=None, help="held-out split (default: the rest of the manifest's split)"
    )
    r.add_argument("--data-dir", default=None)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--no-progress", action="store_true")

    c = sub.add_parser(
        "classifier",
        help="train the evaluation classifier (class accuracy and FD features for `ddm eval`)",
        description="Train a small CNN classifier; its test accuracy goes to meta.json.",
    )
    c.add_argument("--dataset", default="mnist", choices=("mnist", "fashion-mnist"))
    c.add_argument(
        "--split", default="test[:8000]", help="training split (default: test[:8000], offline MNIST)"
    )
    c.add_argument("--eval-split", default=None, help="test split (default: the rest of --split)")
    c.add_argument("--epochs", type=int, default=15)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--data-dir", default=None)
    c.add_argument("--out", required=True, type=Path)
    c.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    if args.what == "router":
        return train_router_command(args)
    if args.what == "classifier":
        return train_classifier_command(args)
    return train_expert_command(args)


def train_classifier_command(args: argparse.Namespace) -> int:
    from ddm.ops.classifier import train_classifier
    from ddm.ops.data import load_dataset

    train = load_dataset(args.dataset, args.split, args.data_dir)
    eval_split = args.eval_split or heldout_split(train.split)
    if eval_split is None:
        raise ConfigError(
            f"expected --eval-split: {train.split} has no held-out rest (e.g. --split 'test[:8000]')"
        )
    test = load_dataset(args.dataset, eval_split, args.data_dir)
    meta = {
        "format": 1,
        "dataset": args.dataset,
        "split": train.split,
        "eval_split": test.split,
        "data_sha256": train.sha256,
        "created": utc_now(),
    }
    print(
        f"training the {args.dataset} classifier on {len(train)} images of {train.split}, "
        f"testing on {test.split}"
    )
    final = train_classifier(
        train.as_model_input(),
        np.asarray(train.labels),
        test.as_model_input(),
        np.asarray(test.labels),
        args.out,
        meta,
        epochs=args.epochs,
        seed=args.seed,
        progress=not args.no_progress,
    )
    print(
        f"test accuracy {final['test_accuracy']:.4f} on {final['num_test']} images of {test.split} "
        f"({final['wall_time_s']} s) -> {args.out}"
    )
    return 0


def partition_meta(manifest) -> dict:
    """What a checkpoint records about the partition it was trained on."""
    keys = ("id", "dataset", "split", "data_sha256", "method", "num_clusters")
    return {k: getattr(manifest, k) for k in keys}


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def heldout_split(split: str) -> str | None:
    """'test[:8000]' -> 'test[8000:]' (the rest of the same split), else None."""
    from ddm.ops.data import parse_split

    name, start, stop = parse_split(split)
    return f"{name}[{stop}:]" if start == 0 and stop is not None else None


def train_router_command(args: argparse.Namespace) -> int:
    from ddm.ops.data import load_dataset
    from ddm.ops.partition import Manifest
    from ddm.router.learned import load_router
    from ddm.router.router_net import RouterConfig
    from ddm.router.train_router import accuracy_by_t, plot_accuracy, save_eval, train_router

    manifest = Manifest.load(args.partition)
    dataset = load_dataset(manifest.dataset, manifest.split, args.data_dir)
    manifest.check_dataset(dataset)
    cfg = RouterConfig(num_clusters=manifest.num_clusters, channels=args.channels)
    meta = {
        "format": 1,
        "partition": partition_meta(manifest),
        "created": utc_now(),
    }
    print(
        f"training router for {manifest.num_clusters} clusters on {len(dataset)} samples of "
        f"{manifest.dataset} {manifest.split} -> {args.out}"
    )
    final = train_router(
        dataset.as_model_input(),
        np.asarray(dataset.labels),
        np.asarray(manifest.assignments),
        cfg,
        args.out,
        meta,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        label_dropout=args.label_dropout,
        progress=not args.no_progress,
    )
    eval_split = args.eval_split or heldout_split(manifest.split)
    if eval_split is not None and manifest.method != "random":
        held = load_dataset(manifest.dataset, eval_split, args.data_dir)
        images, labels, clusters = (
            held.as_model_input(),
            np.asarray(held.labels),
            manifest.assign(held.images, held.labels),
        )
        where = f"held-out {manifest.dataset} {held.split}"
    else:  # random shards have no rule for new samples: measure on the training split, and say so
        idx = np.random.default_rng(0).permutation(len(dataset))[:2000]
        images, labels, clusters = (
            dataset.as_model_input()[idx],
            np.asarray(dataset.labels)[idx],
            manifest.assignments[idx],
        )
        where = f"{len(idx)} training samples ({manifest.method} shards have no rule for new samples)"
    router = load_router(args.out)
    curves = {
        "with label y": accuracy_by_t(router, images, labels, clusters, conditional=True),
        "unconditional (y = null)": accuracy_by_t(router, images, labels, clusters, conditional=False),
    }
    for c in curves.values():
        c["data"] = where
    save_eval(args.out, curves)
    plot_accuracy(curves, args.out / "accuracy_by_t.png", f"router accuracy vs t - {where}")
    print(
        f"done: {final['steps']} steps, {final['wall_time_s']} s, loss {final['final_loss']:.4f}; "
        f"accuracy on {where}:"
    )
    for name, c in curves.items():
        print(
            f"  {name:26s} "
            + " ".join(f"t~{m:.2f}:{a:.3f}" for m, a in zip(c["t_mid"], c["accuracy"], strict=True))
        )
    print(f"plot: {args.out / 'accuracy_by_t.png'}")
    return 0


def train_expert_command(args: argparse.Namespace) -> int:
    from ddm.ops.data import load_dataset
    from ddm.ops.partition import Manifest

    manifest = Manifest.load(args.partition)
    if not 0 <= args.expert < manifest.num_clusters:
        raise ConfigError(expected(f"--expert in [0, {manifest.num_clusters})", args.expert))
    dataset = load_dataset(manifest.dataset, manifest.split, args.data_dir)
    manifest.check_dataset(dataset)
    idx = manifest.indices(args.expert)
    images, labels = dataset.as_model_input()[idx], dataset.labels[idx]
    cluster = manifest.clusters[args.expert]

    tcfg = TrainConfig(
        preset=args.preset,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        save_every=args.save_every,
    )
    ucfg = get_preset(args.preset)
    meta = {
        "format": 1,
        "framework": args.framework,
        "preset": args.preset,
        "config": ucfg.to_dict(),
        "expert": args.expert,
        "partition": partition_meta(manifest),
        "classes": [c for c, n in enumerate(cluster.label_counts) if n > 0],
        "label_counts": list(cluster.label_counts),
        "device": args.device,
        "created": utc_now(),
    }
    _check_resume(args, meta)

    if args.framework == "torch":
        from ddm.workers.torch_expert.train import TorchTrainer

        trainer = TorchTrainer(ucfg, tcfg, device=args.device)
    else:
        from ddm.workers.jax_expert.train import JaxTrainer

        trainer = JaxTrainer(ucfg, tcfg)
    print(
        f"training {args.framework} expert {args.expert} ({args.preset}) on {len(idx)} samples "
        f"of {manifest.dataset} {manifest.split}, classes {meta['classes']} -> {args.out}"
    )
    final = train_loop(trainer, images, labels, tcfg, args.out, meta, progress=not args.no_progress)
    print(
        f"done: {final['steps']} steps, batch {final['batch']}, {final['wall_time_s']} s, "
        f"final loss {final['final_loss']:.4f}"
    )
    return 0


def _check_resume(args: argparse.Namespace, meta: dict) -> None:
    """Refuse to mix runs: resuming must be asked for and must match framework, preset and data."""
    state = args.out / TRAIN_STATE_FILE[args.framework]
    if not state.exists():
        if args.resume and args.out.exists() and any(args.out.iterdir()):
            raise ConfigError(expected(f"a {args.framework} train state in {args.out} to resume", "none"))
        return
    if not args.resume:
        raise ConfigError(
            f"{args.out} already holds a training run; pass --resume to continue it or pick another --out"
        )
    old = json.loads((args.out / "meta.json").read_text())
    for key in ("framework", "preset", "expert", "partition"):
        if old.get(key) != meta[key]:
            raise ConfigError(
                expected(f"--resume with the same {key} as {args.out}", f"{meta[key]} vs {old.get(key)}")
            )
