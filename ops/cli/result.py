"""`ddm result JOB`: an earlier job's images, as a PNG grid and/or the raw latents."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddm.ops.cli.job_flags import JOB_ID_HELP


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Fetch the final images of a job from Redis (DDM_REDIS_URL, DDM_PREFIX) and save them. A job that "
        "failed or was cancelled has no images (exit 1, with the reason); so has one still running, "
        "unless --timeout waits for it."
    )
    parser.add_argument(
        "job",
        help=JOB_ID_HELP,
    )
    parser.add_argument("--out", type=Path, default=None, help="save a PNG grid of the images")
    parser.add_argument("--npy", type=Path, default=None, help="save the images float32 [n, C, H, W]")
    parser.add_argument(
        "--latent",
        action="store_true",
        help="a latent deployment's job: the final latents, not the decoded pixels (the default)",
    )
    parser.add_argument(
        "--timeout", type=float, default=0.0, help="seconds to wait for a job still queued or running"
    )
    parser.add_argument("--json", action="store_true", help="print the status and saved files as JSON")


def main(args: argparse.Namespace) -> int:
    import numpy as np

    from ddm.client.client import Client
    from ddm.client.images import save_grid
    from ddm.ops.cli.job_flags import live_space
    from ddm.ops.command_kit import print_json
    from ddm.schema.descriptor import DIGITS, labels_summary
    from ddm.webui.payloads import grid_cols  # the web UI's download has the same layout

    with Client() as client:
        job = client.job_id(args.job)  # a unique prefix will do
        x = client.result(job, timeout=args.timeout, latent=args.latent)
        st = client.status(job)
        # the space the job recorded; a job from before the record: the live deployment's (or the legacy)
        space = st.picture_space(latent=args.latent) or live_space(client, images=not args.latent)
    saved = {}
    if args.out:
        cols = grid_cols(st.labels or [0])
        saved["png"] = str(save_grid(x, args.out, cols=cols, value_range=space.value_range))
    if args.npy:
        args.npy.parent.mkdir(parents=True, exist_ok=True)
        np.save(args.npy, x)
        saved["npy"] = str(args.npy)
    if args.json:
        print_json({**st.to_dict(), "shape": list(x.shape), "saved": saved})
        return 0
    if st.space is not None:  # the labels' names as the job's deployment named them
        names = st.space.class_names
    else:
        names = space.class_names if x.shape[1:] == space.shape else DIGITS
    labels = labels_summary(st.labels, names)  # "unconditional" for the null label
    print(
        f"job {st.job_id} {st.status.value}: {st.n} images (labels {labels}), {st.steps} steps, "
        f"strategy {st.strategy}, guidance {st.guidance}"
        + (f" -> {', '.join(saved.values())}" if saved else "")
    )
    if not saved:
        print("(--out PNG and/or --npy FILE save the images)", file=sys.stderr)
    return 0
