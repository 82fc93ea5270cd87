"""Flags that describe a sampling job, shared by `ddm sample --local` and `ddm submit`."""

from __future__ import annotations

import argparse

from ddm.schema.errors import ConfigError
from ddm.schema.flow import NULL_CLASS
from ddm.schema.messages import MAX_SAMPLES
from ddm.schema.solver import SOLVERS

NULL_WORD = "null"  # how an unconditional image (the null label) is spelled in --labels


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags describing a job; shared with `ddm submit`."""
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--label",
        type=int,
        help="one label, repeated --n times (with no label flag at all: label 3, so a bare command asks "
        "for 8 images of label 3)",
    )
    who.add_argument(
        "--labels",
        help="comma-separated labels; the whole list is repeated --n times, e.g. --labels 3,8 --n 2 "
        f"gives 3,8,3,8 (one grid column per label); `{NULL_WORD}` is an unconditional image (the null "
        f"label, {NULL_CLASS} in the job), e.g. --labels 3,{NULL_WORD}",
    )
    who.add_argument(
        "--all-labels",
        action="store_true",
        help="labels 0-9, the whole list repeated --n times (0..9,0..9,...: one grid column per label)",
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
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial noise")


def job_labels(args: argparse.Namespace) -> tuple[list[int], int]:
    """(labels per image, grid columns). Images are ordered row by row with one column per label: the
    label list is repeated --n times (--labels 3,8 --n 2 -> [3, 8, 3, 8], 2 columns)."""
    if args.labels:
        try:
            base = [_label(s.strip()) for s in args.labels.split(",") if s.strip()]
        except ValueError:
            raise ConfigError(f"expected --labels like 0,3,7 or 3,{NULL_WORD}, got {args.labels!r}") from None
    elif args.all_labels:
        base = list(range(10))
    elif args.unconditional:
        base = [NULL_CLASS]
    else:
        base = [3 if args.label is None else args.label]
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


def _label(text: str) -> int:
    """One --labels entry: an int, or `null` for the null label (an unconditional image)."""
    return NULL_CLASS if text.lower() == NULL_WORD else int(text)
