"""The fuzz run: hostile messages of every category (ops/fuzz/messages.py) into the jobs queue and the
expert queues of a serving pipeline, while legitimate jobs of every strategy run; then the ledger.

    python -m ddm.ops.fuzz.run --deployment D --messages 10000 --jobs 24 --seed 0 [--json out.json]

It talks to the pipeline on this environment's DDM_* settings (`ddm up`, or a test's Pipeline) and
needs the deployment's checkpoints to sample the same jobs in process. It passes (exit 0) only when:
every hostile message came back as a dead letter with a reason (lost: 0), none was answered, nothing
unpickled (the marker file does not exist), every legitimate job ended done, not degraded, and equal
to the local sampler within 1e-4 (altered: 0), and every worker that was live at the start still is.
Legitimate jobs ask for on_expert_loss="degrade", so an expert wrongly judged gone would show.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ddm.ops.command_kit import add_deployment_flag
from ddm.ops.fuzz.messages import CATEGORIES, hostile_messages
from ddm.schema.errors import ConfigError
from ddm.schema.messages import JobSpec
from ddm.schema.settings import Settings
from ddm.schema.topology import REASON_HEADER

TOLERANCE = 1e-4
JOB_STEPS = 8


@dataclass
class FuzzReport:
    sent: dict[str, int] = field(default_factory=dict)  # category -> hostile messages published
    dead_lettered: dict[str, int] = field(default_factory=dict)  # category -> came back with a reason
    foreign: int = 0  # dead letters of this prefix that are not this run's (a legitimate refusal)
    without_reason: int = 0  # dead letters with no reason header (a broker's, not a worker's)
    answered: int = 0  # replies to hostile requests (none may decode into a request with a reply)
    jobs: int = 0
    jobs_exact: int = 0
    jobs_degraded: int = 0
    max_abs_diff: float = 0.0
    workers_lost: list[str] = field(default_factory=list)
    pickle_ran: bool = False
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        """Sent and never back, per category (a duplicate in one cannot hide a loss in another)."""
        return sum(max(0, n - self.dead_lettered.get(c, 0)) for c, n in self.sent.items())

    @property
    def duplicates(self) -> int:
        return sum(max(0, self.dead_lettered.get(c, 0) - n) for c, n in self.sent.items())

    @property
    def altered(self) -> int:
        return self.jobs - self.jobs_exact

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.duplicates == 0
            and self.without_reason == 0
            and self.answered == 0
            and self.altered == 0
            and not self.workers_lost
            and not self.pickle_ran
        )

    def to_dict(self) -> dict:
        return asdict(self) | {
            "lost": self.lost,
            "duplicates": self.duplicates,
            "altered": self.altered,
            "ok": self.ok,
        }


def _legit_specs(strategies: tuple[str, ...], jobs: int, rng: random.Random) -> list[JobSpec]:
    return [
        JobSpec.new(
            [rng.randrange(10), rng.randrange(10)],
            steps=JOB_STEPS,
            strategy=strategies[i % len(strategies)],
            guidance=1.0,
            seed=rng.getrandbits(31),
            on_expert_loss="degrade",
        )
        for i in range(jobs)
    ]


def run_fuzz(
    settings: Settings,
    deployment_path: Path,
    *,
    messages: int,
    jobs: int,
    seed: int,
    categories: tuple[str, ...] = CATEGORIES,
) -> FuzzReport:
    """Send `messages` hostile messages of `categories`, in turn, while `jobs` legitimate jobs run; then
    count what was dead-lettered, answered, lost or altered. Messages for the decoder stage go only to
    a deployment with a decoder."""
    from ddm.client.client import Client
    from ddm.runtime.amqp import connect
    from ddm.runtime.heartbeat import read_live_workers

    rng = random.Random(seed)
    report = FuzzReport(sent=dict.fromkeys(categories, 0), dead_lettered=dict.fromkeys(categories, 0))
    names = settings.names
    started = time.monotonic()
    with Client(settings=settings) as client, tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "pwned"
        descriptor = client.deployment()
        before = set(read_live_workers(client.redis, names))
        conn = connect(settings.amqp_url, name="fuzz")
        ch = conn.channel()
        ch.confirm_delivery()
        waiting = ch.queue_declare(names.dead_letter_queue, passive=True).method.message_count
        if waiting:  # the ledger takes every dead letter of the prefix: an operator's must not be among them
            raise ConfigError(
                f"{names.dead_letter_queue} holds {waiting} message(s): the fuzz run reads every dead "
                "letter of its prefix; run it on a prefix of its own (DDM_PREFIX=fuzz-1. ...)"
            )
        tag = uuid.uuid4().hex[:12]  # this run's: in every message id and valid body it sends
        reply_to = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
        latent_shape = descriptor.sample_space.shape if descriptor.sample_space else (1, 32, 32)
        specs = _legit_specs(descriptor.strategies, jobs, rng)
        every = max(1, messages // max(1, jobs))
        sent, rounds, legit = 0, 0, iter(specs)
        with tqdm(total=messages, desc="hostile messages", unit="msg", file=sys.stderr) as bar:
            while sent < messages:
                category = categories[rounds % len(categories)]
                rounds += 1
                for hostile in hostile_messages(category, rng, marker, reply_to, tag, latent_shape):
                    if sent >= messages:
                        break
                    queue = _target_queue(hostile.target, names, descriptor, rng)
                    if queue is None:
                        continue  # no decoder stage to attack
                    if hostile.category != "properties":
                        hostile.properties.message_id = f"fuzz.{tag}.{hostile.category}.{sent}"
                    ch.basic_publish("", queue, hostile.body, hostile.properties)
                    report.sent[hostile.category] += 1
                    sent += 1
                    bar.update(1)
                    if sent % every == 0 and (spec := next(legit, None)) is not None:
                        client.submit(spec)
        for spec in legit:
            client.submit(spec)
        results = {
            spec.job_id: client.result(spec.job_id, timeout=600, on_degraded="ignore") for spec in specs
        }
        _ledger(ch, names, report, tag, expected=sum(report.sent.values()))
        report.answered = ch.queue_declare(reply_to, passive=True).method.message_count
        conn.close()
        _compare_with_local(deployment_path, specs, results, client, report)
        report.workers_lost = sorted(before - set(read_live_workers(client.redis, names)))
        report.pickle_ran = marker.exists()
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _target_queue(target: str, names, descriptor, rng: random.Random) -> str | None:
    """The queue a hostile message goes to: the jobs queue, one expert's (at random) or the decoder's
    (None: the deployment has no decoder stage to attack)."""
    if target == "expert":
        return names.expert_queue(rng.randrange(len(descriptor.experts)))
    if target == "decoder":
        return None if descriptor.decoder is None else names.decoder_queue
    return names.jobs


def _compare_with_local(deployment_path: Path, specs, results: dict, client, report: FuzzReport) -> None:
    """Every legitimate job's image against the same job sampled in process: exact unless degraded."""
    from ddm.router.deployment_loader import load_experts, read_deployment
    from ddm.router.sampler import sample_local
    from ddm.schema.deployment import Deployment

    deployment = Deployment.load(deployment_path)
    loaded = read_deployment(deployment)
    policy = loaded.policy()
    experts = {k: e.velocity for k, e in load_experts(deployment).items()}
    local = loaded.describe(policy, "local")
    for spec in specs:
        report.jobs += 1
        want = sample_local(experts, policy, local.resolve(spec))
        diff = float(np.abs(results[spec.job_id] - want).max())
        report.max_abs_diff = max(report.max_abs_diff, diff)
        degraded = bool(client.status(spec.job_id).degraded)
        report.jobs_degraded += degraded
        report.jobs_exact += diff <= TOLERANCE and not degraded


def _ledger(ch, names, report: FuzzReport, tag: str, *, expected: int, settle_s: float = 30.0) -> None:
    """Drain ddm.dead into the report: this run's by the message id it gave (the category), or, for
    properties that never decoded (no message id survives), by the run's tag in the body."""
    got, deadline = 0, time.monotonic() + settle_s
    while time.monotonic() < deadline:
        method, props, body = ch.basic_get(names.dead_letter_queue, auto_ack=True)
        if method is None:
            if got >= expected:
                break
            time.sleep(0.2)
            continue
        message_id = props.message_id or ""
        if message_id.startswith(f"fuzz.{tag}."):
            category = message_id.split(".")[2]
        elif not message_id and tag.encode() in body:
            category = "properties"
        else:
            report.foreign += 1
            continue
        got += 1
        reason = str((props.headers or {}).get(REASON_HEADER, ""))
        if not reason or (category == "properties" and "undecodable AMQP properties" not in reason):
            report.without_reason += 1
            continue
        report.dead_lettered[category] = report.dead_lettered.get(category, 0) + 1
        deadline = time.monotonic() + settle_s


def main(argv: list[str] | None = None) -> int:
    from ddm.schema.deployment import resolve_deployment

    parser = argparse.ArgumentParser(prog="python -m ddm.ops.fuzz.run", description=__doc__.split("\n\n")[0])
    add_deployment_flag(parser, what=", the serving one's")
    parser.add_argument("--messages", type=int, default=10_000, help="hostile messages to send")
    parser.add_argument("--jobs", type=int, default=24, help="legitimate jobs to run meanwhile")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the report here too")
    args = parser.parse_args(argv)
    settings, deployment = Settings.from_env(), resolve_deployment(args.deployment)
    report = run_fuzz(settings, deployment, messages=args.messages, jobs=args.jobs, seed=args.seed)
    text = json.dumps(report.to_dict(), indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
