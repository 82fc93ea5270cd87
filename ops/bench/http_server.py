"""The HTTP-per-step baseline's expert server: one expert behind POST /velocity (npz in, npz out), one
forward pass at a time, as the design before the RabbitMQ pipeline ran it. `ddm bench` starts one per
expert (`python -m ddm.ops.bench.http_server --deployment D --expert K --port P`); the sampling side
is ddm.ops.bench.http_baseline.
"""

from __future__ import annotations

import argparse
import threading
import time

import flask
import numpy as np
from werkzeug.serving import WSGIRequestHandler, make_server

from ddm.ops.bench.http_wire import BadRequestError, encode_arrays, parse_velocity_request, wait_healthy
from ddm.ops.command_kit import add_deployment_flag
from ddm.schema.errors import SchemaError

MAX_BODY_BYTES = 64 * 1024 * 1024  # far above any real step (64 rows are ~260 KB); refuses runaway bodies


def make_app(expert, expert_id: int) -> flask.Flask:
    """A Flask app serving one expert: POST /velocity (npz -> npz) and GET /healthz."""
    app = flask.Flask(f"ddm-bench-http-expert-{expert_id}")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    # One forward pass at a time: the HTTP-per-step design had no batching, so concurrent requests queue here.
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


# ---------------------------------------------------------------- serving one expert of a deployment


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ddm.ops.bench.http_server",
        description="Serve one expert of a deployment the HTTP-per-step way (POST /velocity, npz in and out, "
        "one forward at a time): the baseline `ddm bench` compares against.",
    )
    add_deployment_flag(parser, required=True)
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
