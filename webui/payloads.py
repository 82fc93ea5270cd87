"""What the browser receives: frames, job status and deployment facts as small JSON-able dicts.

A frame's latent (float16 [n, C, H, W], any sample space) is turned into uint8 pixels here, once per
frame (webui/pixels.py: greyscale for one channel, RGB for three), and sent as one base64 string of
n*H*W*channels bytes (row-major, image after image, RGB interleaved): about 1.4 KB per image per step
at 1x32x32, 4 KB at 3x32x32, and the page draws it with putImageData without any further maths.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from ddm.schema.autoencoder_card import DecoderInfo
from ddm.schema.descriptor import label_name
from ddm.schema.jobs import JobHash, degraded_text
from ddm.schema.messages import Frame, JobStatus
from ddm.schema.queue import QueuePosition
from ddm.schema.solver import Solver
from ddm.webui.pixels import DEFAULT_RANGE, to_pixels

WEIGHT_DECIMALS = 3


def frame_payload(
    frame: Frame, value_range: tuple[float, float] = DEFAULT_RANGE, decoder: DecoderInfo | None = None
) -> dict[str, Any]:
    """Frame -> {"job_id", "step", "t", "n", "shape" ([C, H, W] of what is drawn), "channels" (1: the
    pixels are greyscale, 3: RGB), "pixels" (base64 uint8 [n, H, W] or [n, H, W, 3]: to_pixels, the
    latent mapped from `value_range`, the sample space's), "experts", "missing" (experts left out: no
    live worker), "weights" ([n][K], rounded), "served" ([n] lists of the experts that computed each
    image's velocity: weight > 0 before rounding, so a weight shown as 0.000 may still have been
    served), "latency_ms", "compute_ms", "preview" (true: a latent deployment's frame, drawn through its
    decoder's linear latent -> RGB map at the pixels' size; the decoded image comes with the result)}."""
    x = frame.x
    if decoder is not None:
        x = decoder.preview.apply(frame.x, decoder.upscale(tuple(frame.x.shape[1:])))
    pixels, channels = to_pixels(x, value_range)
    chosen = frame.weights > 0  # [n, K]
    return {
        "job_id": frame.job_id,
        "step": frame.step,
        "t": round(frame.t, 6),
        "n": int(frame.x.shape[0]),
        "shape": [int(d) for d in x.shape[1:]],
        "channels": channels,
        "pixels": base64.b64encode(pixels.tobytes()).decode("ascii"),
        "experts": list(frame.experts),
        "missing": list(frame.missing),
        "weights": np.round(frame.weights.astype(np.float64), WEIGHT_DECIMALS).tolist(),
        "served": [[k for k in frame.experts if row[k]] for row in chosen],
        "latency_ms": round(frame.latency_ms, 2),
        "compute_ms": round(frame.compute_ms, 2),
        "preview": decoder is not None,
    }


MAX_GRID_COLS = 16  # a picture grid is at most this wide, unless it has more distinct labels


def grid_cols(labels: list[int] | tuple[int, ...]) -> int:
    """Columns of the picture grid. Labels come row by row (parse_form: one column per label), so the
    columns are a multiple of the distinct labels (column c holds label c mod distinct); of those the
    most square grid is taken (fewest empty cells breaking a tie, then the wider one). One label alone,
    unconditional images included, is any layout: 9 images are 3 x 3, not a one-column sliver."""
    n = len(labels)
    distinct = max(1, len(set(labels)))
    if n <= distinct:
        return max(1, n)
    best: tuple[int, int, int] | None = None  # (squareness, empty, -cols)
    for cols in range(distinct, max(distinct, min(n, MAX_GRID_COLS)) + 1, distinct):
        rows = math.ceil(n / cols)
        score = (abs(rows - cols), rows * cols - n, -cols)
        if best is None or score < best:
            best = score
    assert best is not None
    return -best[2]


def job_payload(job: JobHash, queue: QueuePosition | None = None) -> dict[str, Any]:
    """A job hash -> what the page shows about it (no internal fields). strategy and guidance are the
    values the router resolved; while queued, the submitted ones (None: the deployment's default).
    "queue": a queued job's place and estimate (QueuePosition.to_dict of `queue`, the shape `ddm status
    --json` prints); None for a job not queued, and
    where no place was read (the recent jobs of the overview). solver, grid and nfe (velocity evaluations:
    steps x the solver's per step) likewise: the router's once it started the job, before that what the
    job asked for (None: the deployment's default, and nfe None unless the solver is named)."""
    spec = job.spec
    labels = list(job.labels)
    out = {
        "job_id": job.job_id,
        "status": job.status.value,
        "step": job.step,
        "steps": job.steps,
        "n": job.n,
        "labels": labels,
        # the labels' names as the job's deployment named them (None: a job from before the record; the
        # page names them by the serving deployment then), and that deployment's name
        "label_names": [label_name(y, job.space.class_names) for y in labels] if job.space else None,
        "deployment": job.deployment,
        # a text job's prompt and what guidance steered away from (None: a class job; the empty prompt)
        "prompt": spec.prompt if spec else None,
        "negative_prompt": spec.negative_prompt if spec else None,
        "priority": job.priority or 0,
        "cols": grid_cols(labels) if labels else 1,
        "strategy": job.strategy if job.strategy is not None else (spec.strategy if spec else None),
        "guidance": job.guidance if job.guidance is not None else (spec.guidance if spec else None),
        "resolved": job.strategy is not None,
        **_sampling(job),
        "seed": job.seed,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "mean_step_ms": job.mean_step_ms,
        "error": job.error or None,
        "resumed_from": job.resumed_from,
        # steps run without an expert that had no live worker: not the model that was asked for there
        "degraded": degraded_text(job.degraded) if job.degraded else None,
        "queue": queue.to_dict() if queue is not None and job.status is JobStatus.QUEUED else None,
        "owner": job.owner,  # the user whose API key submitted it (None: no key): it and admins see the job
    }
    if job.status is JobStatus.DONE:
        out["result_png"] = f"/api/jobs/{job.job_id}/result.png"
    return out


def _sampling(job: JobHash) -> dict[str, Any]:
    """{"solver", "grid", "nfe"} of a job: what the router resolved and recorded (a job started by a router
    from before solvers recorded none: Euler on the uniform grid, one evaluation per step), else what
    the spec asks for."""
    if job.strategy is not None:  # started: the router resolved it
        solver = job.solver or "euler"
        return {
            "solver": solver,
            "grid": job.grid or "uniform",
            "nfe": job.nfe if job.nfe is not None else Solver.parse(solver).nfe(job.steps),
        }
    spec = job.spec
    solver = spec.solver if spec else None
    return {
        "solver": solver,
        "grid": spec.grid if spec else None,
        "nfe": Solver.parse(solver).nfe(job.steps) if solver else None,
    }
