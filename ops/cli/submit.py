"""`ddm submit`: queue a sampling job on the pipeline; optionally wait, follow its steps, save the result."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ddm.ops.cli.job_flags import add_job_arguments, job_labels, job_spec, live_space, read_init_noise
from ddm.schema.messages import EXPERT_LOSS_POLICIES
from ddm.schema.topology import JOB_MAX_PRIORITY


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Validate a job against the serving router's deployment, queue it on ddm.jobs and print its id. "
        "Strategy and guidance left out get the serving deployment's defaults (the router resolves them; "
        "`ddm status` shows what it used). With --wait, follow its steps from Redis and save the final "
        "images. With no label flag it asks for 8 images of label 3 (--label 3 --n 8). Broker, Redis and "
        "prefix come from DDM_AMQP_URL, DDM_REDIS_URL, DDM_PREFIX."
    )
    add_job_arguments(parser)
    # No deployment file here: what a job means is the serving router's to say.
    parser.add_argument(
        "--no-check", action="store_true", help="skip the check against the serving deployment's descriptor"
    )
    parser.add_argument(
        "--on-expert-loss",
        choices=EXPERT_LOSS_POLICIES,
        default=None,
        help="when an expert the routing chose has no live worker: wait (up to the router's grace, then "
        "fail) or degrade (full and topk:K route around it, the steps marked degraded; --wait then "
        "exits 0 and warns, where an unasked-for degraded result exits 3); "
        "default: the serving deployment's",
    )
    parser.add_argument(
        "--queue-anyway",
        action="store_true",
        help="queue the job even if a worker it needs (an expert, a latent deployment's decoder) has no "
        "live replica (it runs once one is up)",
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=None,
        metavar=f"0..{JOB_MAX_PRIORITY}",
        help="queued jobs of a higher priority start first (default: 0, the lowest)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="S",
        help="cancel the job if it is not done S seconds from now (its error says so)",
    )
    parser.add_argument(
        "--notify",
        default=None,
        metavar="URL",
        help="an http(s) URL the router POSTs once when the job ends (done, failed or cancelled): JSON with "
        "job_id, status and error; retried a few times, a 5 s timeout each (docs/PROTOCOL.md 4.3)",
    )
    parser.add_argument("--wait", action="store_true", help="follow the job to the end (a progress bar)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait at most (with --wait); the job itself runs on, as it does after a Ctrl-C",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="save a PNG grid of the result (implies --wait)"
    )
    parser.add_argument(
        "--npy",
        type=Path,
        default=None,
        help="save the final images float32 [n, C, H, W] of the deployment's sample space (implies --wait)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the job as JSON (with --wait: its final status) instead of its id",
    )


def main(args: argparse.Namespace) -> int:
    from ddm.client.client import Client
    from ddm.ops.command_kit import print_json

    with Client() as client:
        space = live_space(client)
        labels, cols = job_labels(args, space)
        spec = job_spec(args, labels, on_expert_loss=args.on_expert_loss)
        job_id = client.submit(
            spec,
            check=not args.no_check,
            queue_anyway=args.queue_anyway,
            priority=args.priority,
            deadline_s=args.deadline,
            init_noise=read_init_noise(args),
        )
        if not args.json:
            print(job_id, flush=True)  # stdout carries only the id: JOB=$(ddm submit ...)
        if not (args.wait or args.out or args.npy):
            if args.json:
                print_json(client.status(job_id).to_dict())
            return 0
        return _wait_or_say_why_not(client, spec, cols, args)


def _wait_or_say_why_not(client, spec, cols: int, args: argparse.Namespace) -> int:
    """_wait; on its --timeout or a Ctrl-C, where the job stands and how to follow or stop it (it runs
    on: a client that stops waiting cancels nothing)."""
    from ddm.client.errors import JobTimeoutError
    from ddm.ops.cli.exit_codes import FAILURE
    from ddm.ops.cli.job_hints import still_going

    try:
        return _wait(client, spec, cols, args)
    except JobTimeoutError:
        st = client.status(spec.job_id)
        if st.status.terminal:
            raise  # it ended meanwhile: the client's own error says how
        said = still_going(spec.job_id, st)
        print(f"ddm submit: no end within --timeout {args.timeout:g} s: {said}", file=sys.stderr)
        return FAILURE
    except KeyboardInterrupt:
        said = still_going(spec.job_id, client.status(spec.job_id))
        print(f"\nddm submit: interrupted, stopped waiting: {said}", file=sys.stderr)
        return 130  # as the shell reports a Ctrl-C


def _wait(client, spec, cols: int, args: argparse.Namespace) -> int:
    import numpy as np
    from tqdm import tqdm

    t0 = time.monotonic()
    used: set[int] = set()
    with tqdm(total=spec.steps, desc=f"job {spec.job_id[:8]}", unit="step", file=sys.stderr) as bar:
        for frame in client.frames(spec.job_id, timeout=args.timeout):
            used.update(frame.experts)
            bar.update(frame.step - bar.n)
            bar.set_postfix_str(f"t={frame.t:.2f} experts={sorted(used)}", refresh=False)
    left = None if args.timeout is None else max(0.0, args.timeout - (time.monotonic() - t0))
    x = client.result(spec.job_id, timeout=left, on_degraded="ignore")  # said below, with its exit code
    st = client.status(spec.job_id)
    saved = []
    if args.out:
        from ddm.client.images import save_grid

        value_range = live_space(client).value_range
        saved.append(str(save_grid(x, args.out, cols=cols, value_range=value_range)))
    if args.npy:
        args.npy.parent.mkdir(parents=True, exist_ok=True)
        np.save(args.npy, x)
        saved.append(str(args.npy))
    if args.json:
        from ddm.ops.command_kit import print_json

        print_json({**st.to_dict(), "experts_used": sorted(used), "saved": saved})
    mean, resumed = st.mean_step_ms, st.resumed_from
    print(
        f"job {spec.job_id} done: {spec.n} images, {spec.steps} steps, strategy {st.strategy}, "
        f"guidance {st.guidance}, experts {sorted(used)}, {time.monotonic() - t0:.1f} s"
        + (f", mean step {mean:.1f} ms" if mean is not None else "")
        + (f", resumed from step {resumed}" if resumed else "")
        + (f" -> {', '.join(saved)}" if saved else ""),
        file=sys.stderr,
    )
    return _degraded_exit(spec, st)


def _degraded_exit(spec, st) -> int:
    """0, or DEGRADED (saying why on stderr) when steps ran without an expert and the job did not ask
    for that itself: the images are not the model that was asked for."""
    from ddm.ops.cli.exit_codes import DEGRADED, OK
    from ddm.schema.jobs import degraded_text

    if not st.degraded:
        return OK
    print(f"warning: job {spec.job_id} was degraded: {degraded_text(st.degraded)}", file=sys.stderr)
    if spec.on_expert_loss == "degrade":
        return OK  # asked for with --on-expert-loss degrade
    print(
        f"exit {DEGRADED}: the serving deployment degrades by default; pass --on-expert-loss wait to fail "
        "instead, or --on-expert-loss degrade to accept it",
        file=sys.stderr,
    )
    return DEGRADED
