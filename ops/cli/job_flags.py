"""Flags that describe a sampling job, shared by `ddm sample --local` and `ddm submit`."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.messages import MAX_SAMPLES, JobSpec, job_options
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.schema.solver import SOLVERS

NULL_WORD = "null"  # how an unconditional image (the null label) is spelled in --labels
JOB_ID_HELP = (
    "job id (as printed by `ddm submit`), or a unique prefix of it: 4 characters or more, so the 8 the "
    "progress bar and the web UI show will do"
)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags describing a job; shared with `ddm submit`."""
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--label",
        help="one label (0..K-1 or a class name), repeated --n times (with no label flag at all: label 3, "
        "so a bare command asks for 8 images of label 3)",
    )
    who.add_argument(
        "--labels",
        help="comma-separated labels 0..K-1 of the deployment's K classes, or class names; the whole list "
        "is repeated --n times, e.g. --labels 3,8 --n 2 gives 3,8,3,8 (one grid column per label); "
        f"`{NULL_WORD}` is an unconditional image (the number K, {LEGACY.null_class} for MNIST, is refused: "
        f"a class past the last), e.g. --labels 3,{NULL_WORD}",
    )
    who.add_argument(
        "--all-labels",
        action="store_true",
        help="every label 0..K-1 of the deployment, the whole list repeated --n times (0..K-1,0..K-1,...: "
        "one grid column per label)",
    )
    who.add_argument(
        "--unconditional",
        action="store_true",
        help=f"every image unconditional (--labels {NULL_WORD}): no label, the router reads x_t alone; "
        "the oracle strategy cannot route it (left unset, the strategy is then the deployment's default, "
        "or top1 where that is the oracle)",
    )
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help=f"images per label (default: 8 for one label, else 4); a job holds at most {MAX_SAMPLES} "
        "images: --n times the number of labels",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=50,
        help="solver steps (default: 50; --solver heun/midpoint: 2 evaluations each)",
    )
    parser.add_argument(
        "--solver",
        default=None,
        help=f"{' | '.join(SOLVERS)}: how each step integrates the flow (ab2/ab3 reuse earlier steps' "
        "velocities: one evaluation per step; default: the deployment's, euler unless it says otherwise)",
    )
    parser.add_argument(
        "--grid",
        default=None,
        help="uniform | shift:S | edm[:R]: where the steps fall in t (default: the deployment's, uniform "
        "unless it says otherwise; one it does not serve is refused, naming the ones it does)",
    )
    parser.add_argument(
        "--strategy",
        default=None,
        help="oracle | top1 | topk:K | full (default: the serving deployment's default strategy)",
    )
    parser.add_argument(
        "--guidance",
        type=float,
        default=None,
        help="classifier-free guidance scale (1 = none; default: the serving deployment's)",
    )
    _add_start_flags(parser)
    parser.add_argument(
        "--prompt",
        default=None,
        help="a text deployment's prompt for every image (at most 2000 characters; cut to its encoder's "
        "token limit); a class deployment refuses it: name classes with --labels there",
    )
    parser.add_argument(
        "--negative-prompt",
        default=None,
        help="with --prompt: what guidance steers away from (default: the empty prompt)",
    )


def _add_start_flags(parser: argparse.ArgumentParser) -> None:
    """Where a job starts: its seed's noise, or a given one."""
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial noise")
    parser.add_argument(
        "--init-noise",
        type=Path,
        default=None,
        metavar="FILE.npy",
        help="start from this noise instead of the seed's: float [n, C, H, W] of the deployment's sample "
        "space (to reproduce a run exactly, or compare against another implementation from the same start)",
    )


def job_labels(args: argparse.Namespace, space: SampleSpace = LEGACY) -> tuple[list[int | None], int]:
    """(labels per image, grid columns) in the deployment's sample space `space`. Images are ordered
    row by row with one column per label: the label list is repeated --n times (--labels 3,8 --n 2 ->
    [3, 8, 3, 8], 2 columns; None: an unconditional image). A label outside 0..K-1 is refused naming the
    range and the classes."""
    if args.labels:
        base = [_flag_label("--labels", s.strip(), space) for s in args.labels.split(",") if s.strip()]
    elif args.all_labels:
        base = list(range(space.num_classes)) or [None]
    elif args.unconditional or not space.conditional:
        if args.label is not None:
            raise ConfigError(f"expected no --label: the sample space is unconditional ({space.describe()})")
        base = [None]
    else:
        base = [
            (3 if space.num_classes > 3 else 0)
            if args.label is None
            else _flag_label("--label", args.label, space)
        ]
    for y in base:
        if y is not None and not 0 <= y < space.num_classes:
            raise ConfigError(
                f"expected labels 0..{space.num_classes - 1} ({_names(space)}) or {NULL_WORD}, got {y}"
            )
    n = args.n if args.n is not None else (8 if len(base) == 1 else 4)
    if n < 1:
        raise ConfigError(f"expected --n >= 1, got {n}")
    if n * len(base) > MAX_SAMPLES:
        # checked here, in the flags' words: the job's own check counts labels, which the user never typed
        per = f"{len(base)} labels" if len(base) > 1 else "1 label"
        raise ConfigError(
            f"expected at most {MAX_SAMPLES} images in one job (--n times the labels), got --n {n} x {per} "
            f"= {n * len(base)} images; lower --n, or split the work into several jobs"
        )
    if len(base) == 1:
        return base * n, min(n, 8)
    return base * n, len(base)


def _names(space: SampleSpace) -> str:
    names = ", ".join(space.class_names[:10]) + (", ..." if space.num_classes > 10 else "")
    return names or "none: unconditional"


def _flag_label(flag: str, text: str, space: SampleSpace) -> int | None:
    """One label as typed after `flag`; ConfigError naming the item that is neither a label nor a class."""
    try:
        label = _label(text, space)
    except ValueError:
        raise ConfigError(
            f"expected {flag} items like 0, 3 or {NULL_WORD}, or class names ({_names(space)}), got {text!r}"
        ) from None
    if space.conditional and label == space.null_class:
        # K is the null class inside; typed as a number it is a class past the last, not a wish
        raise ConfigError(
            f"expected {flag} labels 0..{space.num_classes - 1} ({_names(space)}) or {NULL_WORD}, got "
            f"{text}: {text} is past the last class; write {NULL_WORD} for an unconditional image"
        )
    return label


def _label(text: str, space: SampleSpace = LEGACY) -> int | None:
    """One --labels entry: an int, a class name of `space` (any case), or `null`: None, an unconditional
    image."""
    if text.lower() == NULL_WORD:
        return None
    try:
        return int(text)
    except ValueError:
        folded = [n.lower() for n in space.class_names]
        if text.lower() in folded:
            return folded.index(text.lower())
        raise


def live_space(client, images: bool = False) -> SampleSpace:
    """The serving deployment's sample space (its descriptor), or LEGACY when no router serves (a job
    then waits in the queue unchecked: --no-check). images: the space of its finished images (a latent
    deployment's decoder pixels)."""
    from ddm.client.errors import NoDeploymentError

    try:
        descriptor = client.deployment()
    except NoDeploymentError:
        return LEGACY
    return descriptor.image_space if images else descriptor.sample_space


def job_spec(args: argparse.Namespace, labels: list[int], **more) -> JobSpec:
    """The JobSpec the shared job flags describe, with a fresh id; `more`: fields a command adds
    (`ddm submit`'s on_expert_loss)."""
    return JobSpec.new(labels, **job_options(args, **more))


def read_init_noise(args: argparse.Namespace) -> np.ndarray | None:
    """--init-noise's array (np.load without pickles: a file a user handed us), or None; its shape is
    checked against the job where it is used (schema/init_noise.py)."""
    if args.init_noise is None:
        return None
    try:
        return np.load(args.init_noise, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise SchemaError(f"--init-noise {args.init_noise}: expected a .npy file of floats: {exc}") from None
