"""`ddm train expert`: train one expert alone on one cluster of a partition manifest."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

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


def main(args: argparse.Namespace) -> int:
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
        "partition": {
            "id": manifest.id,
            "dataset": manifest.dataset,
            "split": manifest.split,
            "data_sha256": manifest.data_sha256,
            "method": manifest.method,
            "num_clusters": manifest.num_clusters,
        },
        "classes": [c for c, n in enumerate(cluster.label_counts) if n > 0],
        "label_counts": list(cluster.label_counts),
        "device": args.device,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
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
