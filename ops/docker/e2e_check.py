"""Jobs through the compose stack, checked against `ddm sample` in this process (ops/docker/e2e.sh).

    python ops/docker/e2e_check.py --deployment checkpoints/mnist/deployment.toml --jobs 6 --steps 16 \
        [--kill-after-step 3 --kill 'shell command'] --json out.json

Connects with DDM_AMQP_URL / DDM_REDIS_URL / DDM_QUEUE_TYPE from the environment (e2e.sh points them at
the containers' addresses on the compose bridge). Submits --jobs jobs covering every expert of the
deployment: each job asks for the classes of one expert's share (from its checkpoint's card), alternating
experts, or, where the experts share classes (k-means clusters), runs `full` (every expert at every step);
plus one job with every class under the deployment's default strategy. A latent deployment's results are
its decoder's pixels, compared with `ddm sample`'s latents decoded in this process. With
--kill, the command runs once the first job has stored --kill-after-step steps (mid-run: the others are
queued or running), and every job must still end done. Each result must equal the in-process sampler's
(the code `ddm sample` runs: same routing, mixing, solver) within 1e-4, and no job may be degraded.
Prints one line per job and writes a JSON summary; exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TOLERANCE = 1e-4  # what tests/pipeline holds pipeline results to against the local sampler


def make_specs(deployment, jobs: int, steps: int):
    """[(the experts the job surely asks, JobSpec)]: with disjoint label sets, top-1 jobs asking for one
    expert's classes, alternating experts; where the experts share classes (k-means clusters), `full`
    jobs, which ask every expert at every step. Then one job of every class under the deployment's default
    strategy (whichever experts its router picks: none counted)."""
    from ddm.router.deployment_loader import read_deployment
    from ddm.schema.messages import JobSpec

    loaded = read_deployment(deployment)
    descriptor = loaded.describe(loaded.policy(), "local")
    every_class = list(range(descriptor.sample_space.num_classes or 10))
    shares = {int(e.id): [int(c) for c in e.labels] or every_class for e in descriptor.experts}
    disjoint = sum(map(len, shares.values())) == len(set().union(*shares.values()))
    ids = sorted(shares)
    specs = []
    for i in range(jobs - 1):
        asked = [ids[i % len(ids)]] if disjoint else ids
        classes = shares[asked[0]] if disjoint else every_class
        labels = [classes[(i + j) % len(classes)] for j in range(4)]
        strategy = "top1" if disjoint else "full"
        specs.append((asked, JobSpec.new(labels, steps=steps, seed=100 + i, strategy=strategy)))
    specs.append(([], JobSpec.new(every_class, steps=steps, seed=7)))
    return specs


def references(deployment, specs):
    """What `ddm sample` gives for each spec (its unset fields resolved as the router resolves them), as
    Client.result returns it: a latent deployment's decoded to pixels."""
    from ddm.router.deployment_loader import load_decoder, load_experts, read_deployment
    from ddm.router.sampler import sample_local

    loaded = read_deployment(deployment)
    policy = loaded.policy()
    experts = load_experts(deployment, device="cpu")
    velocities = {k: e.velocity for k, e in experts.items()}
    descriptor = loaded.describe(policy, "local")
    decoder = load_decoder(deployment, device="cpu")
    out = [sample_local(velocities, policy, descriptor.resolve(spec)) for spec in specs]
    return out if decoder is None else [decoder.decode(x) for x in out]


def wait_for_step(client, job_id: str, step: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        status = client.status(job_id)
        if status.step >= step or status.status.value in ("done", "failed", "cancelled"):
            return
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} did not reach step {step} in {timeout:.0f} s")


def compare(client, planned, results: dict, wants: list, label: str, failures: list[str]) -> list[dict]:
    """One row per planned job: its status and how far its result is from `ddm sample`'s (printed as it
    goes); a result too far, or degraded, is added to failures."""
    rows = []
    for (asked, spec), want in zip(planned, wants, strict=True):
        status = client.status(spec.job_id)
        got = results.get(spec.job_id)
        diff = None if got is None else float(np.abs(got - want).max())
        ok = diff is not None and diff <= TOLERANCE and not status.degraded
        rows.append(
            {
                "job": spec.job_id,
                "experts": asked,
                "labels": list(spec.labels),
                "strategy": status.strategy,
                "status": status.status.value,
                "max_abs_diff": diff,
                "degraded": bool(status.degraded),
                "resumed_from": status.resumed_from,
                "ok": ok,
            }
        )
        print(
            f"[{label}] job {spec.job_id[:8]} expert {asked[0] if len(asked) == 1 else 'all'} "
            f"labels {list(spec.labels)}: {status.status.value}, max |pipeline - ddm sample| = "
            f"{'n/a' if diff is None else f'{diff:.2e}'}{' DEGRADED' if status.degraded else ''}"
            f"{'' if ok else '  FAIL'}",
            flush=True,
        )
        if not ok and got is not None:
            failures.append(f"{spec.job_id}: diff {diff} degraded {status.degraded}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployment", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--kill", default=None, help="shell command to run mid-run (kills something)")
    parser.add_argument("--kill-after-step", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for every job to end")
    parser.add_argument("--label", default="jobs")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)

    from ddm.client import Client
    from ddm.schema.deployment import Deployment

    deployment = Deployment.load(args.deployment)
    client = Client()
    started = time.monotonic()
    planned = make_specs(deployment, args.jobs, args.steps)
    specs = [spec for _, spec in planned]
    for spec in specs:
        client.submit(spec)
    submitted_s = time.monotonic() - started
    killed = None
    if args.kill:
        wait_for_step(client, specs[0].job_id, args.kill_after_step, timeout=args.timeout)
        t = time.monotonic()
        out = subprocess.run(args.kill, shell=True, capture_output=True, text=True, check=False)
        killed = {
            "command": args.kill,
            "rc": out.returncode,
            "output": (out.stdout + out.stderr).strip()[-400:],
            "at_s": round(t - started, 2),
            "jobs_done_before": sum(client.status(s.job_id).status.value == "done" for s in specs),
        }
        print(f"[{args.label}] ran `{args.kill}` at {killed['at_s']} s (rc {out.returncode})", flush=True)
        if out.returncode != 0:
            print(out.stdout + out.stderr, file=sys.stderr)
    results, failures = {}, []
    deadline = time.monotonic() + args.timeout  # for all the jobs together
    for spec in specs:
        try:
            left = max(1.0, deadline - time.monotonic())
            results[spec.job_id] = client.result(spec.job_id, timeout=left, on_degraded="ignore")
        except Exception as exc:  # a lost or failed job: reported, not raised
            failures.append(f"{spec.job_id}: {type(exc).__name__}: {exc}")
    pipeline_s = time.monotonic() - started
    t0 = time.monotonic()
    wants = references(deployment, specs)
    reference_s = time.monotonic() - t0
    rows = compare(client, planned, results, wants, args.label, failures)
    summary = {
        "label": args.label,
        "jobs": len(specs),
        "steps": args.steps,
        "done": sum(r["status"] == "done" for r in rows),
        "checked_ok": sum(r["ok"] for r in rows),
        "lost": len(specs) - len(results),
        "experts_covered": sorted(set().union(*(asked for asked, _ in planned))),
        "submit_s": round(submitted_s, 2),
        "pipeline_s": round(pipeline_s, 2),
        "reference_s": round(reference_s, 2),
        "kill": killed,
        "failures": failures,
        "rows": rows,
    }
    args.json.write_text(json.dumps(summary, indent=2))
    verdict = "OK" if not failures and summary["checked_ok"] == len(specs) else "FAIL"
    print(
        f"[{args.label}] {verdict}: {summary['checked_ok']}/{len(specs)} jobs equal to `ddm sample` "
        f"(<= {TOLERANCE}), {summary['lost']} lost, experts {summary['experts_covered']}, "
        f"{pipeline_s:.1f} s through the stack",
        flush=True,
    )
    client.close()
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
