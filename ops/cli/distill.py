"""`ddm distill`: train one student on a deployment's routed ensemble (ddm.ops.distill)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddm.ops.cli.parser import add_deployment_flag
from ddm.workers.architectures import DEFAULT_ARCHITECTURE, architecture_names, preset_names
from ddm.workers.frameworks import framework_names
from ddm.workers.training import TrainConfig

DESCRIPTION = """\
Distil a deployment into one dense student: the student regresses the routed ensemble's velocity
(guidance 1, routed by the deployment's router with --strategy, each teacher through Expert.velocity)
at x_t = t*x1 + (1-t)*x0 of real images, with expert training's t distribution and label dropout
(so the student takes classifier-free guidance), instead of x1 - x0. Same optimiser, EMA,
checkpoints and --resume as `ddm train expert`.

--out becomes a normal expert checkpoint (meta.json records `distilled_from`: deployment, strategy,
the teachers' paths and meta digests) plus MODEL_CARD.md and OUT/deployment.toml, the student alone
as a one-expert deployment (checkpoint ".", oracle router, the teachers' guidance and class names):
  ddm eval --deployment OUT/deployment.toml --classifier <teachers' folder>/classifier --out ...
  ddm up --deployment OUT/deployment.toml
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_deployment_flag(parser, required=True, what=" of the teachers")
    parser.add_argument("--framework", choices=framework_names(), required=True, help="the student's")
    parser.add_argument(
        "--arch",
        default=DEFAULT_ARCHITECTURE,
        choices=architecture_names(),
        help="the student's model (default: %(default)s)",
    )
    parser.add_argument(
        "--preset", default="small", choices=preset_names(), help="model size, per --arch (default: small)"
    )
    parser.add_argument(
        "--strategy",
        default=None,
        help="routing of the target: oracle | top1 | topk:K | full "
        "(default: the deployment's default strategy, as its router resolves it)",
    )
    parser.add_argument(
        "--steps", type=int, default=TrainConfig.steps, help="optimizer steps (default: %(default)s)"
    )
    parser.add_argument(
        "--batch", type=int, default=TrainConfig.batch, help="images per step (default: %(default)s)"
    )
    parser.add_argument(
        "--lr", type=float, default=TrainConfig.lr, help="peak learning rate (default: %(default)s)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the init and the data order (default: 0)"
    )
    parser.add_argument(
        "--save-every",
        type=int,
        default=TrainConfig.save_every,
        help="checkpoint period in steps (default: %(default)s)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="the student's, torch: cpu or cuda (default: cpu; JAX trains where JAX runs)",
    )
    parser.add_argument(
        "--teacher-device", default=None, help="override every teacher's device (default: the deployment's)"
    )
    parser.add_argument(
        "--dataset",
        default=None,
        help="images to noise (default: the dataset of the teachers' partition, from their meta.json)",
    )
    parser.add_argument(
        "--split",
        default=None,
        help="split of --dataset (default: the teachers' partition's split, the union of their clusters)",
    )
    parser.add_argument("--data-dir", default=None, help="dataset folder (default: $DDM_DATA_DIR or ./data)")
    parser.add_argument("--out", required=True, type=Path, help="the student's checkpoint folder")
    parser.add_argument("--resume", action="store_true", help="continue the distillation already in --out")
    parser.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    from ddm.ops import distill as d
    from ddm.ops.cli.train import train_config
    from ddm.router.deployment_loader import describe, load_experts, load_policy
    from ddm.schema.deployment import Deployment
    from ddm.schema.errors import ConfigError, SchemaError
    from ddm.schema.strategy import Strategy
    from ddm.workers.checkpoint import check_resume
    from ddm.workers.training import make_trainer, train_loop

    deployment = Deployment.load(args.deployment)
    policy = load_policy(deployment)
    strategy = args.strategy or describe(deployment, policy, "distill").default_strategy
    try:
        parsed = Strategy.parse(strategy)
        policy.check_strategy(parsed)
    except SchemaError as exc:
        raise ConfigError(f"--strategy: {exc}") from None
    tcfg = train_config(args)
    # The data before the teachers (loading a JAX teacher compiles it): a wrong split fails at once.
    dataset = _student_data(deployment, args)
    record = d.distilled_from(deployment, str(parsed), tcfg.steps)
    data = {"dataset": dataset.name, "split": dataset.split, "data_sha256": dataset.sha256}
    meta = d.student_meta(
        args.framework, args.preset, data, dataset.labels, record, args.device, architecture=args.arch
    )
    check_resume(args.out, meta, args.resume)
    if args.resume:
        d.check_distill_resume(args.out, meta)

    images, labels = dataset.as_model_input(), dataset.labels
    print(
        f"distilling {deployment.name} ({deployment.num_experts} experts, {deployment.router.kind} router, "
        f"strategy {parsed}) into a {args.framework} {args.preset} student on {len(images)} images of "
        f"{dataset.name} {dataset.split} -> {args.out}"
    )
    ensemble = d.Ensemble(load_experts(deployment, device=args.teacher_device), policy, parsed)
    trainer = make_trainer(args.framework, tcfg, device=args.device, architecture=args.arch)
    batch = d.distill_batch(ensemble, images, labels, tcfg)
    final = train_loop(
        trainer, images, labels, tcfg, args.out, meta, progress=not args.no_progress, batch=batch
    )
    loss = final.get("final_loss")
    print(
        f"done: {final['steps']} steps, batch {final['batch']}, {final['wall_time_s']} s, "
        f"final loss {'-' if loss is None else f'{loss:.4f}'}"
    )
    _write_card(args.out)
    served = d.write_student_deployment(args.out, deployment)
    if served is None:
        print(f"no deployment written: the student lacks some labels (classes {final['classes']})")
        return 0
    classifier = deployment.path.parent / "classifier"
    classifier_flag = str(classifier) if classifier.is_dir() else "<the evaluation classifier>"
    print(f"serve it: ddm up --deployment {served}")
    print(
        f"score it: ddm eval --deployment {served} --classifier {classifier_flag} --out {args.out / 'eval'}"
    )
    return 0


def _student_data(deployment, args: argparse.Namespace):
    """The images to noise: --dataset/--split, what the flags leave out from the teachers' partition
    (with neither flag: the whole split, the union of all its clusters, checked by its hash)."""
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.distill import check_data, teachers_data

    if args.dataset is not None and args.split is not None:
        return load_dataset(args.dataset, args.split, args.data_dir)
    part = teachers_data(deployment, whole=args.dataset is None and args.split is None)
    dataset = load_dataset(args.dataset or part["dataset"], args.split or part["split"], args.data_dir)
    if (dataset.name, dataset.split) == (part["dataset"], part["split"]):
        check_data(dataset, part["data_sha256"])
    return dataset


def _write_card(folder: Path) -> None:
    from ddm.ops.study.model_card import card

    (folder / "MODEL_CARD.md").write_text(card(folder, []))
