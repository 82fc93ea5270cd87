"""Submit a job to a running pipeline, print each denoising step as it lands, save the images as a PNG.

    python examples/follow_job.py --labels 3,8 --n 2 --out digits.png

Needs only the base install (`pip install ddm-pipeline`: the client, no torch or JAX) and a pipeline
running somewhere (`ddm up`); DDM_AMQP_URL, DDM_REDIS_URL and DDM_PREFIX say where. Strategy and
guidance are left to the serving deployment's defaults, as `ddm submit` leaves them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddm.client import Client, JobSpec, png_bytes
from ddm.schema.errors import DDMError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--labels",
        default="3,8",
        help="comma-separated labels: numbers, class names, or null (unconditional) (default: 3,8)",
    )
    parser.add_argument("--n", type=int, default=1, help="images per label (default: 1)")
    parser.add_argument("--steps", type=int, default=50, help="Euler steps (default: 50)")
    parser.add_argument("--out", type=Path, default=Path("job.png"), help="PNG to write (default: job.png)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait (default: 300)")
    args = parser.parse_args(argv)

    with Client() as client:
        labels = parse_labels(parser, args.labels, client.deployment().sample_space)
        spec = JobSpec.new(labels * args.n, steps=args.steps)  # the list repeated n times: 3,8,3,8
        try:
            job_id = client.submit(spec)  # checked against the serving deployment first
        except DDMError as exc:
            print(f"refused: {exc}", file=sys.stderr)
            return 1
        print(f"job {job_id}: {spec.n} images of {args.labels}, {spec.steps} steps", flush=True)
        for frame in client.frames(job_id, timeout=args.timeout):  # stored steps, then live ones
            experts = ",".join(map(str, frame.experts))
            print(f"step {frame.step}/{spec.steps}  t={frame.t:.2f}  experts {experts}", flush=True)
        x = client.result(job_id, timeout=args.timeout)  # float32 [n, C, H, W]: the deployment's space
        st = client.status(job_id)  # what the router resolved, typed
    args.out.write_bytes(png_bytes(x, cols=len(labels)))
    print(f"job {job_id} {st.status.value}: strategy {st.strategy}, guidance {st.guidance} -> {args.out}")
    return 0


def parse_labels(parser, text: str, space) -> list[int]:
    """'3,null' or 'Dress,Bag' -> labels in the serving deployment's sample space (its class names; None,
    an unconditional image, for `null`); a bad item ends the script naming it, as `ddm submit` does."""
    names = [n.lower() for n in space.class_names]
    labels = []
    for item in (s.strip() for s in text.split(",") if s.strip()):
        if item.lower() == "null":
            labels.append(None)  # an unconditional image
        elif item.isdigit():
            labels.append(int(item))
        elif item.lower() in names:
            labels.append(names.index(item.lower()))
        else:
            known = ", ".join(space.class_names)
            parser.error(f"--labels: expected numbers, class names ({known}) or null, got {item!r}")
    return labels


if __name__ == "__main__":
    raise SystemExit(main())
