"""`ddm distill --method reflow` as a workflow (its flags: ops/cli/distill.py; its pieces: ops/reflow.py):
sample the pairs the student lacks (cached by chunk, resumable), then train the student on the straight
flow between each noise and its image, stamp what it cost and write its one-expert deployment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddm.ops import reflow as r
from ddm.ops.distill import (
    check_distill_resume,
    distilled_from,
    student_meta,
    write_student_deployment,
)
from ddm.ops.study.model_card import write_model_card


@dataclass(frozen=True)
class Student:
    """Who the student is and where it goes: what `ddm distill` asks of every method."""

    framework: str
    preset: str
    architecture: str
    device: str
    out: Path
    resume: bool = False
    progress: bool = True
    teacher_device: str | None = None


def checked_student_meta(student: Student, data: dict, labels, record: dict, space) -> dict:
    """The student's meta, checked against a run already in its folder (--resume, or a refusal)."""
    from ddm.workers.checkpoint import check_resume

    meta = student_meta(
        student.framework, student.preset, data, labels, record, student.device,
        architecture=student.architecture, sample_space=space,
    )  # fmt: skip
    check_resume(student.out, meta, student.resume)
    if student.resume:
        check_distill_resume(student.out, meta)
    return meta


def ensure_pairs(deployment, policy, settings: r.PairSettings, pairs_dir: Path, student: Student) -> dict:
    """Sample the chunks not yet in pairs_dir (the teachers load only then); returns the pairs' cost,
    with the forward passes per pair of this run when it sampled any."""
    from ddm.ops.eval.evaluate import CountingExpert
    from ddm.router.deployment_loader import load_experts

    experts = {}
    if r.missing_chunks(pairs_dir, settings.n):
        teachers = load_experts(deployment, device=student.teacher_device)
        experts = {k: CountingExpert(e) for k, e in teachers.items()}
        r.generate_pairs(
            experts, policy, settings, pairs_dir, progress=student.progress, space=deployment.sample_space
        )
    cost = r.pairs_cost(pairs_dir)
    forwards = sum(e.forwards for e in experts.values())
    if forwards:
        cost["forward_passes_per_pair_this_run"] = round(forwards / max(1, settings.n), 1)
    return cost


def distill_reflow(
    deployment, policy, settings: r.PairSettings, student: Student, tcfg, pairs_dir: Path, init_from=None
) -> Path:
    """Pairs, then the student on them; returns the student's deployment file (served at guidance 1
    with a few-step [sampling] offer). tcfg: the student's TrainConfig (no label dropout)."""
    from ddm.workers.training import make_trainer, train_loop

    record = {**distilled_from(deployment, settings.strategy, tcfg.steps), "method": r.REFLOW}
    r.check_pairs_dir(pairs_dir, settings, record["teachers"])
    # the student's "data": the pairs; label counts are known from the settings before sampling
    space = deployment.sample_space
    data = {"dataset": "reflow-pairs", "split": f"{settings.n} pairs", "data_sha256": None}
    meta = checked_student_meta(student, data, r.pair_labels(0, settings.n, space), record, space)
    print(
        f"reflow: {settings.n} pairs from {deployment.name} ({settings.solver} {settings.steps} steps, "
        f"grid {settings.grid}, guidance {settings.guidance:g}, strategy {settings.strategy}) in {pairs_dir}"
    )
    cost = ensure_pairs(deployment, policy, settings, pairs_dir, student)
    x0, x1, y = r.load_pairs(pairs_dir, settings.n)
    meta["distilled_from"] = {
        **record,
        **r.reflow_record(settings, cost, r.pairs_digest(x0, x1, y), init_from and str(init_from)),
    }
    print(f"pairs ready: {len(x0)} (wall {cost.get('wall_s')} s, cpu {cost.get('cpu_s')} s in all)")
    trainer = make_trainer(
        student.framework, tcfg, device=student.device, architecture=student.architecture, space=space
    )
    if init_from is not None and not (student.out / "meta.json").is_file():
        r.init_student(trainer, student.framework, init_from)
    before = r.training_cpu_before(student.out)
    c0 = r.cpu_seconds()
    batch = r.reflow_batch(x0, x1, y, tcfg)
    train_loop(trainer, x1, y, tcfg, student.out, meta, progress=student.progress, batch=batch)
    final = r.stamp_training_cost(student.out, before + r.cpu_seconds() - c0)
    print(f"done: {final['steps']} steps, batch {final['batch']}, {final['wall_time_s']} s")
    write_model_card(student.out)
    return write_student_deployment(student.out, deployment, guidance=1.0, sampling=r.student_offer())
