"""The HTTP-per-step baseline `ddm bench` compares the pipeline against, on the sampler's side.

Before the RabbitMQ pipeline, every denoising step of every job was one HTTP POST of an .npz to an
expert server (ddm.ops.bench.http_server), one request at a time per job, and the server ran one
forward pass at a time (no batching across jobs). Here that design is `router.sampler.sample_local`
driven by HTTP velocity functions: the same loop as every other path, so the result equals
`sample_local` with in-process experts, and only the transport differs. It gets its best shot
(keep-alive connections, no request logging) but no batching:

    HttpVelocity      a VelocityFn that POSTs its rows to one expert server and waits for v
    sample_http       one job: sample_local over HttpVelocity functions, with each step's wall time
    run_http_jobs     many jobs on a thread pool, returning each job's latency
"""

from __future__ import annotations

import http.client
import io
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ddm.ops.bench.http_wire import NPZ_READ_LOCK, connect, encode_arrays
from ddm.router.sampler import sample_local
from ddm.schema.resolved import ResolvedJob


def post_velocity(conn: http.client.HTTPConnection, x, t, y, g) -> np.ndarray:
    """One POST /velocity on a kept-alive connection; returns v f32 [b,1,32,32]."""
    body = encode_arrays(x=x, t=t, y=y, g=g)
    headers = {"Content-Type": "application/octet-stream"}
    try:
        conn.request("POST", "/velocity", body=body, headers=headers)
        response = conn.getresponse()
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
        # The server dropped an idle keep-alive connection; /velocity is pure, so one retry is safe.
        conn.close()
        conn.request("POST", "/velocity", body=body, headers=headers)
        response = conn.getresponse()
    payload = response.read()  # read it all, or the connection cannot carry the next request
    if response.status != 200:
        text = payload.decode("utf-8", "replace").strip()
        raise RuntimeError(f"POST {conn.host}:{conn.port}/velocity -> {response.status}: {text}")
    with NPZ_READ_LOCK, np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        return npz["v"]


class HttpVelocity:
    """velocity(x, t, y, g) -> v over HTTP: a VelocityFn (router/sampler.py) for one expert server.

    The sampler calls it once per step and expert and waits for the answer, so a job has one request
    in flight at a time, as in the HTTP-per-step design.
    """

    def __init__(self, conn: http.client.HTTPConnection):
        self.conn = conn

    def __call__(self, x: np.ndarray, t: np.ndarray, y: np.ndarray, g: np.ndarray) -> np.ndarray:
        return post_velocity(self.conn, x, t, y, g)


def sample_http(
    policy, urls: dict[int, str], spec, session: dict[str, http.client.HTTPConnection] | None = None
) -> tuple[np.ndarray, list[float]]:
    """One job: sample_local with each expert behind HTTP (urls: expert id -> http://host:port).

    session: optional url -> HTTPConnection cache to reuse connections across calls (the caller closes
    them); without it, one connection per expert URL is made for this call and closed at the end
    (http.client connects on the first request, so experts the job never asks cost nothing).
    Returns (x at t = 1 float32 [n,1,32,32], wall time of each step in seconds).
    """
    conns = {} if session is None else session
    for url in urls.values():
        if url not in conns:
            conns[url] = connect(url)
    velocity = {k: HttpVelocity(conns[url]) for k, url in urls.items()}
    marks = [time.perf_counter()]
    try:
        job = ResolvedJob.of(spec)
        x = sample_local(velocity, policy, job, on_step=lambda *_: marks.append(time.perf_counter()))
    finally:
        if session is None:
            for conn in conns.values():
                conn.close()
    return x, np.diff(marks).tolist()


def run_http_jobs(policy, urls: dict[int, str], specs: list, concurrency: int) -> list[float]:
    """Run the jobs on `concurrency` threads (each its own sample_http); each job's latency in seconds,
    in specs order. Raises the first failure (in specs order) if any job failed."""
    if concurrency < 1:
        raise ValueError(f"expected concurrency >= 1, got {concurrency}")

    def timed(spec) -> float:
        start = time.perf_counter()
        sample_http(policy, urls, spec)
        return time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="http-job") as pool:
        futures = [pool.submit(timed, spec) for spec in specs]
        return [f.result() for f in futures]
