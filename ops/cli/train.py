"""`ddm train expert|router|classifier|retrieval|autoencoder`: one expert alone on one cluster of a
partition manifest, the learned router on the manifest, the evaluation classifier, R-precision's image
tower (ops/cli/train_retrieval.py), or a latent deployment's autoencoder (ops/cli/train_autoencoder.py).
The work is done in workers/, router/ and ops/eval/."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddm.ops.cli.train_autoencoder import configure as configure_autoencoder
from ddm.ops.cli.train_retrieval import configure as configure_retrieval
from ddm.ops.cli.train_text import add_text_flag
from ddm.schema.expert_card import OBJECTIVES, SCHEDULES, TIME_CONVENTIONS
from ddm.workers.architectures import DEFAULT_ARCHITECTURE, preset_names, trainable_names
from ddm.workers.frameworks import framework_names
from ddm.workers.training import FitOptions, TrainConfig


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    _configure_expert(sub)
    _configure_router(sub)
    configure_autoencoder(sub)
    configure_retrieval(sub)
    _configure_classifier(sub)


def _configure_expert(sub) -> None:
    p = sub.add_parser(
        "expert",
        help="train one expert on one cluster of a partition",
        description="Train one flow-matching expert on the samples of one cluster, in isolation. "
        "A monolith is the same command on a one-cluster manifest (ddm partition --by all).",
    )
    p.add_argument("--framework", choices=framework_names(), required=True)
    p.add_argument("--partition", required=True, type=Path, help="manifest JSON from `ddm partition`")
    p.add_argument("--expert", required=True, type=int, help="cluster id in the manifest")
    p.add_argument(
        "--arch", default=DEFAULT_ARCHITECTURE, choices=trainable_names(), help="model (default: unet)"
    )
    p.add_argument(
        "--preset", default="small", choices=preset_names(), help="model size, per --arch (default: small)"
    )
    p.add_argument("--steps", type=int, default=TrainConfig.steps, help="optimizer steps")
    p.add_argument("--batch", type=int, default=TrainConfig.batch, help="images per step")
    p.add_argument("--lr", type=float, default=TrainConfig.lr, help="peak learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of the init and the data order")
    p.add_argument("--save-every", type=int, default=TrainConfig.save_every, help="checkpoint period (steps)")
    p.add_argument(
        "--objective",
        default=TrainConfig.objective,
        choices=OBJECTIVES,
        help="what the network learns to predict: the flow velocity, or DDPM eps, x0 (the clean sample) or "
        "v under --schedule; recorded in the expert's card, converted to the one velocity when served",
    )
    p.add_argument(
        "--schedule",
        default="",
        help=f"VP schedule of a ddpm-* objective: {' | '.join(SCHEDULES)}, with parameters as "
        "'linear:beta_min=0.1,beta_max=20' or 'cosine:s=0.008' (default: linear with those)",
    )
    p.add_argument(
        "--time-convention",
        default=TrainConfig.time_convention,
        choices=TIME_CONVENTIONS,
        help="the network's time input: t0-noise (0 = noise, this system's t) or t0-data (0 = data, DDPM's)",
    )
    add_text_flag(p)
    p.add_argument("--device", default="cpu", help="torch: cpu or cuda (training on Neuron is not supported)")
    p.add_argument("--data-dir", default=None, help="dataset folder (default: $DDM_DATA_DIR or ./data)")
    p.add_argument("--out", required=True, type=Path, help="checkpoint folder")
    p.add_argument("--resume", action="store_true", help="continue the run already in --out")
    p.add_argument("--no-progress", action="store_true")


def _configure_router(sub) -> None:
    r = sub.add_parser(
        "router",
        help="train the learned router p(cluster | x_t, t, y) on a partition",
        description="Train the JAX/Flax router with cross-entropy on the manifest's cluster ids (x_t noised "
        "by "
        "the flow convention), then report its accuracy as a function of t on held-out data (plot).",
    )
    r.add_argument("--partition", required=True, type=Path, help="manifest JSON from `ddm partition`")
    r.add_argument("--steps", type=int, default=1500, help="optimizer steps")
    r.add_argument("--batch", type=int, default=128, help="images per step")
    r.add_argument("--lr", type=float, default=2e-3, help="learning rate")
    r.add_argument("--channels", type=int, default=32, help="router width (default 32)")
    r.add_argument(
        "--label-dropout",
        type=float,
        default=0.5,
        help="share of samples shown with the null label, so the router also learns from x_t alone "
        "(with labels a label partition is trivial to route)",
    )
    r.add_argument("--seed", type=int, default=0, help="seed of the init and the data order")
    add_text_flag(r)  # a prompt-aware router (--label-dropout 1: the x_t-only one it is compared with)
    r.add_argument(
        "--eval-split", default=None, help="held-out split (default: the rest of the manifest's split)"
    )
    r.add_argument("--data-dir", default=None)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--no-progress", action="store_true")


def _configure_classifier(sub) -> None:
    c = sub.add_parser(
        "classifier",
        help="train the evaluation classifier (class accuracy and FD features for `ddm eval`)",
        description="Train a small CNN classifier; its test accuracy goes to meta.json.",
    )
    c.add_argument(
        "--dataset",
        default="mnist",
        choices=("mnist", "fashion-mnist", "emoji", "emoji-64"),
        help="dataset to classify (its channels, size and classes size the network)",
    )
    c.add_argument(
        "--split", default="test[:8000]", help="training split (default: test[:8000], offline MNIST)"
    )
    c.add_argument("--eval-split", default=None, help="test split (default: the rest of --split)")
    c.add_argument("--epochs", type=int, default=15, help="passes over the training split")
    c.add_argument("--seed", type=int, default=0, help="seed of the init and the data order")
    c.add_argument("--data-dir", default=None)
    c.add_argument("--out", required=True, type=Path)
    c.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    if args.what == "router":
        return train_router_command(args)
    if args.what == "classifier":
        return train_classifier_command(args)
    if args.what == "retrieval":
        from ddm.ops.cli.train_retrieval import main as train_retrieval_command

        return train_retrieval_command(args)
    if args.what == "autoencoder":
        from ddm.ops.cli.train_autoencoder import main as train_autoencoder_command

        return train_autoencoder_command(args)
    return train_expert_command(args)


def train_expert_command(args: argparse.Namespace) -> int:
    from ddm.ops.data.dataset import load_dataset
    from ddm.schema.errors import ConfigError, expected
    from ddm.schema.partition import read_manifest
    from ddm.workers.checkpoint import check_resume, expert_meta
    from ddm.workers.training import make_trainer, train_loop

    manifest = read_manifest(args.partition)
    if not 0 <= args.expert < manifest.num_clusters:
        raise ConfigError(expected(f"--expert in [0, {manifest.num_clusters})", args.expert))
    dataset = load_dataset(manifest.dataset, manifest.split, args.data_dir)
    manifest.check_dataset(dataset)
    idx = manifest.indices(args.expert)
    label_counts = manifest.clusters[args.expert].label_counts
    tcfg = train_config(args)  # refuses an unknown objective, schedule or time convention
    space = dataset.sample_space  # a latent dataset's is its latents'
    text = None
    if args.text:  # captions encoded once; the card records the encoder, the space has no classes
        from ddm.ops.cli.train_text import prepare_text

        text = prepare_text(
            args.text, manifest.dataset, manifest.split, args.data_dir, idx, space, args.prompt_embeddings
        )
        space = text.space
    meta = expert_meta(
        args.framework,
        args.preset,
        args.expert,
        manifest.identity(),
        label_counts,
        args.device,
        architecture=args.arch,
        objective=tcfg.objective_record(),
        sample_space=space,
        conditioning=text.conditioning if text else None,
        **({"prompts": text.record} if text else {}),
    )
    check_resume(args.out, meta, args.resume)
    width = text.table.width if text else 0
    trainer = make_trainer(
        args.framework, tcfg, device=args.device, architecture=args.arch, space=space, text_width=width
    )
    print(
        f"training {args.framework} expert {args.expert} ({args.arch} {args.preset}) on {len(idx)} samples "
        f"of {manifest.dataset} {manifest.split}, classes {meta['classes']} -> {args.out}"
    )
    images, labels = dataset.as_model_input()[idx], dataset.labels[idx]
    table = text.table if text else None
    final = train_loop(trainer, images, labels, tcfg, args.out, meta, not args.no_progress, text=table)
    print(
        f"done: {final['steps']} steps, batch {final['batch']}, {final['wall_time_s']} s, "
        f"final loss {final['final_loss']:.4f}"
    )
    return 0


def train_router_command(args: argparse.Namespace) -> int:
    import numpy as np

    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.eval.router_data import router_eval_set
    from ddm.router.router_net import RouterConfig
    from ddm.router.train_router import class_conditions, evaluate_router, train_router
    from ddm.schema.checkpoint_meta import utc_now
    from ddm.schema.errors import ConfigError, expected
    from ddm.schema.partition import read_manifest

    manifest = read_manifest(args.partition)
    dataset = load_dataset(manifest.dataset, manifest.split, args.data_dir)
    manifest.check_dataset(dataset)
    print(
        f"training router for {manifest.num_clusters} clusters on {len(dataset)} samples of "
        f"{manifest.dataset} {manifest.split} -> {args.out}"
    )
    # the dataset's sample space: channels, size and classes (1x32x32, 10 for MNIST as before); a
    # prompt-aware router's: the space without classes, and the prompts' width
    space, sizing, text, meta = dataset.sample_space, {"channels": args.channels}, None, {}
    if args.text:
        from ddm.ops.cli.train_text import prepare_text

        text = prepare_text(
            args.text,
            manifest.dataset,
            manifest.split,
            args.data_dir,
            np.arange(len(dataset)),
            dataset.sample_space,
            args.prompt_embeddings,
        )
        space, sizing["text_width"] = text.space, text.table.width
        meta = {"prompts": text.record, "conditioning": text.conditioning.to_dict()}
    final = train_router(
        dataset.as_model_input(),
        np.asarray(dataset.labels),
        np.asarray(manifest.assignments),
        RouterConfig.for_space(manifest.num_clusters, space, **sizing),
        args.out,
        {"partition": manifest.identity(), "created": utc_now(), **meta},
        fit=FitOptions(
            steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed, progress=not args.no_progress
        ),
        label_dropout=args.label_dropout,
        text=text.table if text else None,
    )
    held = router_eval_set(manifest, dataset, args.eval_split, args.data_dir, args.prompt_embeddings)
    if text:
        if held.split is None:
            raise ConfigError(
                expected("--eval-split naming a held-out split with captions (e.g. test)", held.where)
            )
        conditions = text.heldout_conditions(manifest.dataset, held.split, args.data_dir)
    else:
        conditions = class_conditions(held.labels, space.num_classes)
    curves = evaluate_router(args.out, held.images, conditions, held.clusters, held.where)
    print(
        f"done: {final['steps']} steps, {final['wall_time_s']} s, loss {final['final_loss']:.4f}; "
        f"accuracy on {held.where}:"
    )
    for name, c in curves.items():
        points = zip(c["t_mid"], c["accuracy"], strict=True)
        print(f"  {name:26s} " + " ".join(f"t~{m:.2f}:{a:.3f}" for m, a in points))
    print(f"plot: {args.out / 'accuracy_by_t.png'}")
    return 0


def train_classifier_command(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.splits import heldout_split
    from ddm.ops.eval.classifier import CLASSIFIER_FIT, train_classifier
    from ddm.schema.errors import ConfigError

    train = load_dataset(args.dataset, args.split, args.data_dir)
    eval_split = args.eval_split or heldout_split(train.split)
    if eval_split is None:
        raise ConfigError(
            f"expected --eval-split: {train.split} has no held-out rest (e.g. --split 'test[:8000]')"
        )
    test = load_dataset(args.dataset, eval_split, args.data_dir)
    print(
        f"training the {args.dataset} classifier on {len(train)} images of {train.split}, "
        f"testing on {test.split}"
    )
    fit = replace(CLASSIFIER_FIT, epochs=args.epochs, seed=args.seed, progress=not args.no_progress)
    final = train_classifier(train, test, args.out, fit=fit)
    print(
        f"test accuracy {final['test_accuracy']:.4f} on {final['num_test']} images of {test.split} "
        f"({final['wall_time_s']} s) -> {args.out}"
    )
    return 0


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig of a training command's flags (`ddm train expert`, `ddm distill`)."""
    return TrainConfig(
        preset=args.preset,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        save_every=args.save_every,
        objective=getattr(args, "objective", TrainConfig.objective),  # `ddm distill` trains velocity
        schedule=getattr(args, "schedule", ""),
        time_convention=getattr(args, "time_convention", TrainConfig.time_convention),
    )
