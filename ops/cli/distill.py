"""`ddm distill`: train one student on a deployment's routed ensemble (ddm.ops.distill)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ddm.ops.command_kit import add_deployment_flag
from ddm.workers.architectures import DEFAULT_ARCHITECTURE, preset_names, trainable_names
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

--method reflow (rectified flow; ddm.ops.reflow) makes a few-step student instead: the ensemble samples
--pairs images from noise (each pair a job of --pair-solver/--pair-steps/--pair-grid at --pair-guidance,
routed by --strategy, cached by chunk in --pairs-dir so a stopped run resumes), and the student fits
the straight flow x_t = t*x1 + (1-t)*x0 -> x1 - x0 between each noise and its image. It samples in 1-4
Euler steps at guidance 1 (the pairs' guidance is inside its flow); meta.json's distilled_from records
the method, pairs (settings, count, digest, cost), training cost and `sampling`, and OUT/deployment.toml
serves it at guidance 1 with a few-step [sampling] offer:
  ddm eval --deployment OUT/deployment.toml --classifier <teachers' folder>/classifier --steps 4 --out ...
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_deployment_flag(parser, required=True, what=" of the teachers")
    parser.add_argument("--framework", choices=framework_names(), required=True, help="the student's")
    parser.add_argument(
        "--arch",
        default=DEFAULT_ARCHITECTURE,
        choices=trainable_names(),
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
    parser.add_argument(
        "--method",
        default="velocity",
        choices=["velocity", "reflow"],
        help="velocity: regress the ensemble's velocity at noised real images (a dense student, same "
        "steps); reflow: sample (noise, image) pairs from the ensemble and fit the straight flow between "
        "them (a 1-4 step student) (default: %(default)s)",
    )
    _add_reflow_flags(parser)
    parser.add_argument("--out", required=True, type=Path, help="the student's checkpoint folder")
    parser.add_argument("--resume", action="store_true", help="continue the distillation already in --out")
    parser.add_argument("--no-progress", action="store_true")


def _add_reflow_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of --method reflow (rectified flow: pairs from the ensemble, then the straight flow)."""
    reflow = parser.add_argument_group("--method reflow")
    reflow.add_argument("--pairs", type=int, default=2048, help="pairs to sample (default: %(default)s)")
    reflow.add_argument(
        "--pair-steps", type=int, default=50, help="steps of the ensemble per pair (default: %(default)s)"
    )
    reflow.add_argument("--pair-solver", default="euler", help="the pairs' solver (default: %(default)s)")
    reflow.add_argument("--pair-grid", default="uniform", help="the pairs' grid (default: %(default)s)")
    reflow.add_argument(
        "--pair-guidance",
        type=float,
        default=None,
        help="the pairs' guidance, learnt into the student's flow (default: the deployment's)",
    )
    reflow.add_argument(
        "--pairs-dir",
        type=Path,
        default=None,
        help="the pairs' cache, resumable (default: OUT.pairs, beside OUT so it is not shipped)",
    )
    reflow.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="start the student from this expert checkpoint's weights (same --arch and --preset; torch)",
    )


def main(args: argparse.Namespace) -> int:
    from ddm.ops import distill as d
    from ddm.ops.cli.train import train_config
    from ddm.ops.reflow_run import Student, checked_student_meta
    from ddm.ops.study.model_card import write_model_card
    from ddm.router.deployment_loader import describe, load_experts, load_policy
    from ddm.schema.deployment import Deployment
    from ddm.schema.errors import ConfigError, SchemaError
    from ddm.schema.strategy import Strategy
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
    student = Student(
        args.framework, args.preset, args.arch, args.device, args.out,
        resume=args.resume, progress=not args.no_progress, teacher_device=args.teacher_device,
    )  # fmt: skip
    if args.method == "reflow":
        # no labels dropped: the pairs' flow is the (guided) conditional one, served at guidance 1
        return _reflow(
            args, deployment, policy, parsed, student, dataclasses.replace(tcfg, label_dropout=0.0)
        )
    # The data before the teachers (loading a JAX teacher compiles it): a wrong split fails at once.
    dataset = _student_data(deployment, args)
    record = d.distilled_from(deployment, str(parsed), tcfg.steps)
    data = {"dataset": dataset.name, "split": dataset.split, "data_sha256": dataset.sha256}
    space = deployment.sample_space  # the student's: its teachers'
    meta = checked_student_meta(student, data, dataset.labels, record, space)

    images, labels = dataset.as_model_input(), dataset.labels
    print(
        f"distilling {deployment.name} ({deployment.num_experts} experts, {deployment.router.kind} router, "
        f"strategy {parsed}) into a {args.framework} {args.preset} student on {len(images)} images of "
        f"{dataset.name} {dataset.split} -> {args.out}"
    )
    teachers = load_experts(deployment, device=args.teacher_device)
    ensemble = d.Ensemble(teachers, policy, parsed, null_class=space.null_class)
    trainer = make_trainer(args.framework, tcfg, device=args.device, architecture=args.arch, space=space)
    batch = d.distill_batch(ensemble, images, labels, tcfg)
    final = train_loop(
        trainer, images, labels, tcfg, args.out, meta, progress=not args.no_progress, batch=batch
    )
    loss = final.get("final_loss")
    print(
        f"done: {final['steps']} steps, batch {final['batch']}, {final['wall_time_s']} s, "
        f"final loss {'-' if loss is None else f'{loss:.4f}'}"
    )
    write_model_card(args.out)
    served = d.write_student_deployment(args.out, deployment)
    if served is None:
        print(f"no deployment written: the student lacks some labels (classes {final['classes']})")
        return 0
    _print_next_steps(served, deployment, [(None, args.out / "eval")])
    return 0


def _reflow(args: argparse.Namespace, deployment, policy, strategy, student, tcfg) -> int:
    """--method reflow: the flags into pair settings, then the workflow (ddm.ops.reflow_run)."""
    from ddm.ops import reflow as r
    from ddm.ops.reflow_run import distill_reflow

    guidance = deployment.guidance if args.pair_guidance is None else args.pair_guidance
    settings = r.PairSettings(
        n=args.pairs,
        steps=args.pair_steps,
        solver=args.pair_solver,
        grid=args.pair_grid,
        guidance=float(guidance if guidance is not None else 1.0),
        strategy=str(strategy),
        seed=args.seed,
    )
    pairs_dir = args.pairs_dir or args.out.with_name(args.out.name + ".pairs")
    served = distill_reflow(deployment, policy, settings, student, tcfg, pairs_dir, args.init_from)
    evals = [
        (steps, args.out.with_name(args.out.name + f".eval{steps}")) for steps in r.STUDENT_SAMPLING["steps"]
    ]
    _print_next_steps(served, deployment, evals)
    return 0


def _print_next_steps(served: Path, deployment, evals: list[tuple[int | None, Path]]) -> None:
    """How to serve the student and score it (per step count for a few-step student: (steps, out))."""
    classifier = deployment.path.parent / "classifier"
    classifier_flag = str(classifier) if classifier.is_dir() else "<the evaluation classifier>"
    print(f"serve it: ddm up --deployment {served}")
    for steps, out in evals:
        step_flag = "" if steps is None else f" --steps {steps}"
        print(
            f"score it: ddm eval --deployment {served} --classifier {classifier_flag}{step_flag} --out {out}"
        )


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
