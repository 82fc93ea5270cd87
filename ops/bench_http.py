"""The seed's HTTP-per-step design, kept alive as the comparison baseline for `ddm bench`.

Issue: "the seed's HTTP-per-step design". Before the RabbitMQ pipeline, every denoising step of every
job was one HTTP POST of an .npz to an expert server, one request at a time per job, and the server ran
one forward pass at a time (no batching across jobs). `ddm bench` (ops/bench.py) measures the pipeline
against exactly that, so this module reproduces it faithfully, giving it its best shot (keep-alive
connections, no request logging) but adding no batching:

    make_app / HttpExpertServer   an expert behind POST /velocity (npz in, npz out)
    sample_http                   one job, the seed's loop; equals router.sampler.sample_local
    run_http_jobs                 many jobs on a thread pool, returning each job's latency

`python -m ddm.ops.bench_http --deployment D --expert K --port P` serves one expert of a deployment.
"""

from __future__ import annotations

import argparse
import http.client
import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import flask
import numpy as np
from numpy.lib.npyio import NpzFile
from werkzeug.serving import WSGIRequestHandler, make_server

from ddm.router.sampler import combine, initial_noise, plan_step
from ddm.schema.errors import SchemaError
from ddm.schema.flow import IMAGE_SHAPE, euler_step, time_grid

# What POST /velocity takes: name -> (dtype, shape description). Rows b are the same for all four.
REQUEST_ARRAYS = {
    "x": (np.float32, "[b,1,32,32]"),
    "t": (np.float32, "[b]"),
    "y": (np.int64, "[b]"),
    "g": (np.float32, "[b]"),
}
EXPECTED_BODY = (
    "an np.savez body with arrays x float32 [b,1,32,32], t float32 [b], y int64 [b], g float32 [b]"
)
# numpy parses .npy headers with ast.literal_eval, which CPython 3.11 before 3.11.8 cannot run on two
# threads at once (SystemError "AST constructor recursion depth mismatch", cpython gh-106905); the
# threaded server and the client's job threads both read npz, so reads take turns.
_NPZ_READ_LOCK = threading.Lock()
MAX_BODY_BYTES = 64 * 1024 * 1024  # far above any real step (64 rows are ~260 KB); refuses runaway bodies


# ---------------------------------------------------------------- the server


class BadRequestError(ValueError):
    """The request body is not what POST /velocity expects (answered with 400)."""


def encode_arrays(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def decode_arrays(body: bytes) -> dict[str, np.ndarray]:
    """All arrays of an .npz body. allow_pickle=False: network data is never unpickled."""
    if not body.startswith(b"PK"):  # npz = zip; anything else would reach numpy's pickle/npy paths
        raise BadRequestError(f"expected {EXPECTED_BODY}, got {len(body)} bytes that are not an .npz (zip)")
    with _NPZ_READ_LOCK:
        return _read_npz(body)


def _read_npz(body: bytes) -> dict[str, np.ndarray]:
    try:
        loaded = np.load(io.BytesIO(body), allow_pickle=False)
    except Exception as exc:  # whatever np.load raises on bad bytes is the client's fault
        raise BadRequestError(f"expected {EXPECTED_BODY}; could not read the .npz: {exc}") from None
    if not isinstance(loaded, NpzFile):
        raise BadRequestError(f"expected {EXPECTED_BODY}, got {type(loaded).__name__}")
    arrays = {}
    with loaded:
        for name in loaded.files:  # members are read lazily: an object array is refused here, never unpickled
            try:
                arrays[name] = loaded[name]
            except Exception as exc:
                why = "it holds Python objects (pickled data)" if "allow_pickle" in str(exc) else str(exc)
                raise BadRequestError(f"expected {EXPECTED_BODY}; refused array {name!r}: {why}") from None
    return arrays


def parse_velocity_request(body: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode and check a /velocity body: (x, t, y, g), or BadRequestError saying what was wrong."""
    arrays = decode_arrays(body)
    if set(arrays) != set(REQUEST_ARRAYS):
        raise BadRequestError(f"expected {EXPECTED_BODY}, got arrays {sorted(arrays)}")
    x = arrays["x"]
    if x.ndim != 4 or x.shape[1:] != IMAGE_SHAPE:
        raise BadRequestError(
            f"expected x float32 [b,1,32,32], got {x.dtype} {list(x.shape)} (the body: {EXPECTED_BODY})"
        )
    b = x.shape[0]
    if b == 0:
        raise BadRequestError("expected at least one row (b >= 1), got b = 0")
    for name, (dtype, shape) in REQUEST_ARRAYS.items():
        a = arrays[name]
        want_shape = x.shape if name == "x" else (b,)
        if a.dtype != dtype or a.shape != want_shape:
            raise BadRequestError(
                f"expected {name} {np.dtype(dtype).name} {shape} with b={b}, got {a.dtype} {list(a.shape)} "
                f"(the body: {EXPECTED_BODY})"
            )
    return x, arrays["t"], arrays["y"], arrays["g"]


def make_app(expert, expert_id: int) -> flask.Flask:
    """A Flask app serving one expert: POST /velocity (npz -> npz) and GET /healthz."""
    app = flask.Flask(f"ddm-bench-http-expert-{expert_id}")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    # One forward pass at a time: the seed had no batching, so concurrent requests queue here.
    forward_lock = threading.Lock()

    @app.get("/healthz")
    def healthz():
        return flask.Response("ok", mimetype="text/plain")

    @app.post("/velocity")
    def velocity():
        try:
            x, t, y, g = parse_velocity_request(flask.request.get_data())
        except BadRequestError as exc:
            return flask.Response(str(exc) + "\n", status=400, mimetype="text/plain")
        try:
            with forward_lock:
                start = time.perf_counter()
                v = expert.velocity(x, t, y, g)
                compute_ms = (time.perf_counter() - start) * 1000.0
        except SchemaError as exc:  # e.g. labels out of range: still the client's input
            return flask.Response(f"expert {expert_id}: {exc}\n", status=400, mimetype="text/plain")
        body = encode_arrays(v=np.asarray(v, dtype=np.float32))
        response = flask.Response(body, mimetype="application/octet-stream")
        response.headers["X-Compute-Ms"] = f"{compute_ms:.3f}"
        return response

    return app


class _QuietRequestHandler(WSGIRequestHandler):
    """No per-request log line: printing one per step would slow the baseline and flood the bench output."""

    def log_request(self, code="-", size="-") -> None:
        pass


class HttpExpertServer:
    """make_app(expert, expert_id) on 127.0.0.1 in a background thread (werkzeug's threaded server).

    Threaded, so werkzeug speaks HTTP/1.1 with keep-alive; the app's lock still serialises forwards.
    """

    def __init__(self, expert, expert_id: int, port: int = 0) -> None:
        self.expert_id = expert_id
        self._server = make_server(
            "127.0.0.1",
            port,  # 0: the OS picks a free port, read back below
            make_app(expert, expert_id),
            threaded=True,
            request_handler=_QuietRequestHandler,
        )
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> HttpExpertServer:
        """Serve in a daemon thread; return once GET /healthz answers."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"http-expert-{self.expert_id}", daemon=True
        )
        self._thread.start()
        wait_healthy(self.url, timeout)
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()  # stops serve_forever; it returns within its 0.5 s poll
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> HttpExpertServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def wait_healthy(url: str, timeout: float = 10.0) -> None:
    """Poll GET url/healthz until it answers 200 (raises TimeoutError after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        conn = _connect(url, timeout=1.0)
        try:
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}/healthz did not answer 200 within {timeout} s")
        time.sleep(0.05)


# ---------------------------------------------------------------- the client (the seed's sampling loop)


def _connect(url: str, timeout: float | None = 60.0) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"expected an http://host:port URL, got {url!r}")
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)


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
    with _NPZ_READ_LOCK, np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        return npz["v"]


def sample_http(
    policy, urls: dict[int, str], spec, session: dict[str, http.client.HTTPConnection] | None = None
) -> tuple[np.ndarray, list[float]]:
    """One job, the seed's loop: each step asks each chosen expert over HTTP, one request at a time.

    Mirrors router.sampler.sample_local step for step (same plan, same rows, same combine and Euler
    step), so the result equals it for the same experts, policy and spec.

    session: optional url -> HTTPConnection cache to reuse connections across calls (the caller closes
    them); without it, one connection per expert URL is opened for this call and closed at the end.
    Returns (x at t = 1 float32 [n,1,32,32], wall time of each step in seconds).
    """
    own = session is None
    conns = {} if own else session
    grid = time_grid(spec.steps)
    labels = np.asarray(spec.labels, dtype=np.int64)
    guidance = np.full(spec.n, spec.guidance, np.float32)
    x = initial_noise(spec)
    step_seconds = []
    try:
        for i in range(spec.steps):
            start = time.perf_counter()
            plan = plan_step(policy, spec.strategy, x, float(grid[i]), labels)
            t_rows = np.full(spec.n, grid[i], np.float32)
            velocities = {}
            for k, rows in plan.rows.items():  # ascending expert ids, one request in flight at a time
                url = urls[k]
                if url not in conns:
                    conns[url] = _connect(url)
                velocities[k] = post_velocity(conns[url], x[rows], t_rows[rows], labels[rows], guidance[rows])
            x = euler_step(x, combine(plan, velocities, spec.n), grid[i], grid[i + 1]).astype(np.float32)
            step_seconds.append(time.perf_counter() - start)
    finally:
        if own:
            for conn in conns.values():
                conn.close()
    return x, step_seconds


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


# ---------------------------------------------------------------- serving one expert of a deployment


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ddm.ops.bench_http",
        description="Serve one expert of a deployment the seed's way (POST /velocity, npz in and out, "
        "one forward at a time): the baseline `ddm bench` compares against.",
    )
    parser.add_argument("--deployment", type=Path, required=True, help="deployment TOML")
    parser.add_argument("--expert", type=int, required=True, help="expert id in the deployment")
    parser.add_argument("--port", type=int, required=True, help="port to listen on (0 = any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--device", default=None, help="override the deployment's device for this expert")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from ddm.schema.deployment import Deployment
    from ddm.workers import load_expert

    args = parse_args(argv)
    entry = Deployment.load(args.deployment).expert(args.expert)
    expert = load_expert(entry.checkpoint, device=args.device or entry.device)
    server = make_server(
        args.host,
        args.port,
        make_app(expert, args.expert),
        threaded=True,
        request_handler=_QuietRequestHandler,
    )
    print(f"expert {args.expert} ({entry.checkpoint}) on http://{args.host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
