"""HTTP routes: the page, a small JSON API, and the result PNG.

GET  /                              the page
GET  /api/config                    the serving deployment (experts, strategies, defaults, class names;
                                    null with deployment_error when no router serves) and limits
GET  /api/cluster                   live workers and queue depths
GET  /api/me                        who the token or key is, and the key's quota left ({"user", "scope",
                                    "key_id", "admin", "quota": {"rate_per_min", "tokens", "max_jobs",
                                    "active_jobs"} or null}: webui/quota.py)
GET  /api/jobs                      recent jobs
POST /api/jobs                      submit {"labels", "n_per_label", "steps", "strategy", "guidance", "seed",
                                    "solver", "grid", "prompt", "negative_prompt"} (a text deployment:
                                    a prompt instead of labels), or {"spec": a JobSpec's JSON} (the
                                    Python HttpClient: labels in any order); a refusal is 4xx (kind
                                    bad_input: 400, 413 for a body over MAX_CONTENT_LENGTH, 415 for one
                                    not JSON)
                                    (with `Authorization: Bearer TOKEN` when DDM_UI_TOKEN is set)
GET  /api/jobs/<id>                 one job's status
POST /api/jobs/<id>/cancel          stop it at its next step (the token a submit needs, when set)
GET  /api/jobs/<id>/result.png      the final images as one PNG grid (?download=1: as an attachment)
GET  /api/jobs/<id>/result.pixels   the final images as a frame's pixels ({"n", "shape", "channels",
                                   "pixels"}): a latent deployment's decoded image replaces the previews
GET  /api/jobs/<id>/result.npy      the final images as float32 [n, C, H, W] in .npy (Client.result's
                                    array: ddm/client/http.py; read with allow_pickle=False)
GET  /healthz                       200 when Redis answers

With DDM_UI_TOKEN set or API keys on (keys.py), every route but `/`, `/healthz` and `/api/config` (and the
static files) needs `Authorization: Bearer TOKEN` or `Bearer KEY` (access.py says why those stay open); a
refusal is 401 (kind unauthorized), 403 (forbidden: a key's scope too small) or, once an address has sent
too many wrong tokens, 429 (rate_limited). A key's user reads, fetches and cancels only their own jobs
(another's is 404, as no job is) and sees others' recent jobs as counts by status ("others").
"""

from __future__ import annotations

import functools

from flask import Flask, Response, g, jsonify, render_template, request

from ddm.client.errors import JobNotFoundError
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.conditioning import MAX_PROMPT_CHARS
from ddm.schema.descriptor import DIGITS, UNCONDITIONAL
from ddm.schema.errors import SchemaError, ServiceUnavailableError, expected
from ddm.schema.flow import NULL_CLASS
from ddm.schema.messages import JobStatus
from ddm.schema.names import check_job_id
from ddm.webui.body import BodyError, json_body
from ddm.webui.jobs import MAX_IMAGES, SubmitError
from ddm.webui.keys import visible
from ddm.webui.payloads import grid_cols, job_payload

# The page loads only its own files: no CDN, no inline script (Socket.IO's client is in static/).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def _error(kind: str, message: str, status: int):
    return jsonify({"ok": False, "kind": kind, "error": message}), status


def bearer_token() -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def _refusal(exc: SubmitError):
    resp = jsonify(exc.to_dict())
    if exc.retry_after_s is not None:
        resp.headers["Retry-After"] = str(int(exc.retry_after_s) + 1)
    return resp, exc.http_status


def _reading(state, what: str):
    """Decorator: the route answers only a request with the token or a key (when DDM_UI_TOKEN is set or
    keys are on); who it is goes to flask.g.principal (keys.py Principal)."""

    def wrap(view):
        @functools.wraps(view)
        def guarded(*args, **kwargs):
            try:
                g.principal = state.access.check(bearer_token(), request.remote_addr or "?", what)
            except SubmitError as exc:
                return _refusal(exc)
            return view(*args, **kwargs)

        return guarded

    return wrap


def register_routes(app: Flask, state) -> None:
    """The page, the config and health routes, and the job API, on `app`."""
    _register_page(app, state)
    _register_jobs(app, state)
    _register_results(app, state)
    _register_cancel(app, state)


def _register_page(app: Flask, state) -> None:
    @app.after_request
    def security_headers(resp: Response) -> Response:
        resp.headers.setdefault("Content-Security-Policy", CSP)
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "no-referrer")
        return resp

    @app.errorhandler(ServiceUnavailableError)
    def service_unavailable(exc):
        return _error("unavailable", str(exc), 503)

    @app.errorhandler(413)
    def too_large(exc):
        # far above any job (two prompts at the schema's limit, every character escaped as JSON, fit):
        # name both limits, so a pasted book reads as a prompt too long, not as a broken server
        cap, got = app.config["MAX_CONTENT_LENGTH"], request.content_length
        what = f"a request body of at most {cap} bytes (a prompt is at most {MAX_PROMPT_CHARS} characters)"
        return _error("bad_input", "request too large: " + expected(what, f"{got or 'more'} bytes"), 413)

    @app.get("/")
    def index():
        view = state.monitor.deployment_view()
        dep = view["deployment"]
        class_names = dep["class_names"] if dep else []  # no router: no classes to offer (not digits)
        return render_template(
            "index.html",
            deployment=dep,
            deployment_error=view["deployment_error"],
            class_names=class_names,
            named_classes=class_names != list(DIGITS),  # chips as wide as their names (app.css)
            null_label=dep["null_label"] if dep else NULL_CLASS,
            prompted=bool(dep) and dep["conditioning_kind"] == "text",  # a prompt box, not label chips
            null_name=UNCONDITIONAL,
            max_images=MAX_IMAGES,
            jobs_per_minute=state.config.jobs_per_minute,
            token_required=state.access.required,
        )

    @app.get("/api/config")
    def config():
        return jsonify(
            {
                **state.monitor.deployment_view(),
                "max_images": MAX_IMAGES,
                "jobs_per_minute": state.config.jobs_per_minute,
                "token_required": state.access.required,
                "prefix": state.settings.prefix,
            }
        )

    @app.get("/api/cluster")
    @_reading(state, "read the cluster")
    def cluster():
        return jsonify(state.monitor.snapshot())

    @app.get("/healthz")
    def healthz():
        try:
            state.client.redis.ping()
        except (*REDIS_CONNECTION_ERRORS, ServiceUnavailableError) as exc:
            return jsonify({"ok": False, "error": f"Redis: {exc}"}), 503
        return jsonify({"ok": True, **state.hub.stats(), **state.hub.counters(), "clients": state.clients})


def _register_jobs(app: Flask, state) -> None:
    @app.get("/api/me")
    @_reading(state, "read your key")
    def me():
        who = g.principal
        body = {"user": who.user, "scope": who.scope, "key_id": who.key_id, "admin": who.admin}
        if who.key_id is None:
            return jsonify({**body, "quota": None})  # DDM_UI_TOKEN or an open server: no quotas
        try:
            left = state.quotas.left(who.key_id, who.rate_per_min, who.max_jobs)
        except REDIS_CONNECTION_ERRORS as exc:
            return _error("unavailable", f"Redis unreachable: {exc}", 503)
        return jsonify({**body, "quota": left._asdict()})

    @app.get("/api/jobs")
    @_reading(state, "read jobs")
    def recent():
        try:
            return jsonify(state.recent_view(g.principal))
        except REDIS_CONNECTION_ERRORS as exc:
            return _error("unavailable", f"Redis unreachable: {exc}", 503)

    @app.post("/api/jobs")
    def submit():
        try:
            data = json_body(request)
        except BodyError as exc:
            return _error("bad_input", exc.message, exc.status)
        try:
            spec = state.jobs.submit(data, request.remote_addr or "?", bearer_token())
        except SubmitError as exc:
            return _refusal(exc)
        return jsonify({"ok": True, "job_id": spec.job_id, "spec": spec.to_dict()}), 201

    @app.get("/api/jobs/<job_id>")
    @_reading(state, "read jobs")
    def job(job_id: str):
        status, err = _job_status(state, job_id)
        if err:
            return err
        queued = status.status is JobStatus.QUEUED  # the place: the hub's reading (at most once a second)
        return jsonify(job_payload(status, state.hub.queue_positions().get(job_id) if queued else None))


def _job_status(state, job_id: str):
    """(the job's JobHash, None), or (None, the error response); another user's job reads as no job."""
    try:
        check_job_id(job_id)
        return visible(g.principal, state.client, job_id), None
    except SchemaError as exc:
        return None, _error("bad_input", str(exc), 400)
    except JobNotFoundError as exc:
        return None, _error("not_found", str(exc), 404)


def _with_result(state, failed_is_conflict: bool = False):
    """Decorator of the result routes: the view gets (job_id, the job's JobHash, its stored result); a bad
    or unknown id, or a job with no result yet, is answered here (404 not_ready; a failed job, with
    failed_is_conflict, 409 with its reason)."""

    def wrap(view):
        @functools.wraps(view)
        def with_result(job_id: str):
            status, err = _job_status(state, job_id)
            if err:
                return err
            x = state.client.stored_result(status)
            if x is None:
                st = status.status.value
                if failed_is_conflict and st == "failed":
                    return _error("failed", f"job {job_id} failed: {status.error or '(no reason)'}", 409)
                return _error("not_ready", f"job {job_id} has no result yet (status {st})", 404)
            return view(job_id, status, x)

        return with_result

    return wrap


def result_value_range(state, status, x) -> tuple[float, float]:
    """The value range the job's pictures are drawn in: the one it recorded (schema/jobs.py), else, for
    a job from before the record, the serving deployment's for that shape."""
    space = status.picture_space()
    if space is not None and space.shape == tuple(x.shape[1:]):
        return space.value_range
    return state.monitor.value_range(tuple(x.shape[1:]))


def _register_results(app: Flask, state) -> None:
    @app.get("/api/jobs/<job_id>/result.png")
    @_reading(state, "read results")
    @_with_result(state, failed_is_conflict=True)
    def result_png(job_id: str, status, x):
        from ddm.client.images import png_bytes

        labels = list(status.labels) or [0] * len(x)
        scale_arg = request.args.get("scale", "3")
        scale = min(4, max(1, int(scale_arg))) if scale_arg.isdigit() and len(scale_arg) < 4 else 3
        # drawn from the sample space's value range (greyscale or RGB as the latent has it)
        value_range = result_value_range(state, status, x)
        png = png_bytes(x, cols=grid_cols(labels), scale=scale, value_range=value_range)
        resp = Response(png, mimetype="image/png")
        disposition = "attachment" if request.args.get("download") == "1" else "inline"
        resp.headers["Content-Disposition"] = f'{disposition}; filename="ddm-{job_id}.png"'
        resp.headers["Cache-Control"] = "private, max-age=3600"  # a result never changes
        return resp

    @app.get("/api/jobs/<job_id>/result.pixels")
    @_reading(state, "read results")
    @_with_result(state)
    def result_pixels(job_id: str, status, x):
        import base64

        from ddm.webui.pixels import to_pixels

        pixels, channels = to_pixels(x, result_value_range(state, status, x))
        resp = jsonify(
            {
                "n": int(x.shape[0]),
                "shape": [int(d) for d in x.shape[1:]],
                "channels": channels,
                "pixels": base64.b64encode(pixels.tobytes()).decode("ascii"),
            }
        )
        resp.headers["Cache-Control"] = "private, max-age=3600"  # a result never changes
        return resp

    @app.get("/api/jobs/<job_id>/result.npy")
    @_reading(state, "read results")
    @_with_result(state, failed_is_conflict=True)
    def result_npy(job_id: str, status, x):
        """The final images as float32 [n, C, H, W], exactly as Client.result returns them (HttpClient)."""
        import io

        import numpy as np

        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(x, dtype=np.float32), allow_pickle=False)
        resp = Response(buf.getvalue(), mimetype="application/octet-stream")
        resp.headers["Cache-Control"] = "private, max-age=3600"  # a result never changes
        return resp


def _register_cancel(app: Flask, state) -> None:
    @app.post("/api/jobs/<job_id>/cancel")
    def cancel(job_id: str):
        """The Cancel button: the router stops the job at its next step (Client.cancel)."""
        try:
            check_job_id(job_id)
            status = state.jobs.cancel(job_id, request.remote_addr or "?", bearer_token())
        except SubmitError as exc:
            return _refusal(exc)
        except SchemaError as exc:
            return _error("bad_input", str(exc), 400)
        except JobNotFoundError as exc:
            return _error("not_found", str(exc), 404)
        return jsonify(job_payload(status))
