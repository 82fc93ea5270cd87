"""The OpenAI-compatible images API, on the web UI's server (same process, same port):

GET  /v1/models                     the served deployment as a model list ({"object": "list", "data": [...]})
GET  /v1/models/<id>                one model (404 for any other)
POST /v1/images/generations         OpenAI's request and response (openai_request.py: the fields and the
                                    extras); `stream: true` answers server-sent events (openai_stream.py)
GET  /v1/images/<job_id>/<i>.png    image i of a finished job, at its own size (response_format "url")

Auth is the UI API's (access.py: DDM_UI_TOKEN or a user's API key, as `Authorization: Bearer KEY`, which
is how the openai client sends its api_key; a key user's job records its owner, and its image URLs answer
only that user and the admins); a job is validated, rate-limited and queued by the page's own JobService.
Waiting for it reads Redis through the UI's Client (XREAD BLOCK of at most half a second at a time, on
the UI's pool): under gunicorn's gevent worker the socket is cooperative, under `ddm ui` each request
has its own thread, so a waiting request freezes no viewer. Every refusal is OpenAI's error object.
"""

from __future__ import annotations

import contextlib
import functools
import time

from flask import Flask, Response, jsonify, request, url_for
from werkzeug.exceptions import RequestEntityTooLarge

from ddm.client.errors import JobCancelledError, JobFailedError, JobNotFoundError, JobTimeoutError
from ddm.schema.errors import SchemaError, ServiceUnavailableError
from ddm.schema.names import check_job_id
from ddm.webui.body import BodyError, json_body
from ddm.webui.jobs import SubmitError
from ddm.webui.keys import visible
from ddm.webui.openai_request import OpenAIError, images_request
from ddm.webui.openai_stream import (
    COMPLETED,
    b64,
    event,
    image_event,
    partial_events,
    partial_steps,
    result_pngs,
)
from ddm.webui.routes import bearer_token, result_value_range

WAIT_S = 600.0  # longest a request waits for its job (queued and running); then 504, the job goes on


def _answer(exc: OpenAIError):
    resp = jsonify(exc.to_dict())
    if exc.retry_after_s is not None:
        resp.headers["Retry-After"] = str(int(exc.retry_after_s) + 1)
    return resp, exc.status


def _openai(view):
    """The view's OpenAIError (or the UI's SubmitError) as OpenAI's error object."""

    @functools.wraps(view)
    def answered(*args, **kwargs):
        try:
            return view(*args, **kwargs)
        except SubmitError as exc:
            return _answer(OpenAIError.from_submit(exc))
        except OpenAIError as exc:
            return _answer(exc)

    return answered


def _check_key(state, action: str):
    """Who the request is (keys.py Principal), or SubmitError (answered as OpenAI's error object)."""
    return state.access.check(bearer_token(), request.remote_addr or "?", action)


def _job_error(exc: Exception, job_id: str) -> OpenAIError:
    """Waiting for a job that did not give images -> OpenAIError (500 failed or cancelled, 504 too slow)."""
    if isinstance(exc, JobTimeoutError):
        return OpenAIError(504, f"{exc} (job {job_id} goes on: GET /api/jobs/{job_id})", code="timeout")
    if isinstance(exc, JobFailedError | JobCancelledError):
        code = "job_failed" if isinstance(exc, JobFailedError) else "job_cancelled"
        return OpenAIError(500, str(exc), code=code)
    return OpenAIError(503, str(exc), code="unavailable")


WAIT_ERRORS = (JobTimeoutError, JobFailedError, JobCancelledError, JobNotFoundError, ServiceUnavailableError)


def register_openai(app: Flask, state) -> None:
    """The /v1 routes on `app` (state: the app's UIState)."""

    @app.get("/v1/models")
    @_openai
    def models():
        _check_key(state, "list models")
        try:
            served = [_model(state.monitor.deployment())]
        except SubmitError as exc:
            if exc.kind != "no_deployment":
                raise
            served = []  # nothing is served: an empty list, not an error
        return jsonify({"object": "list", "data": served})

    @app.get("/v1/models/<path:model_id>")
    @_openai
    def model(model_id: str):
        _check_key(state, "list models")
        descriptor = state.monitor.deployment()
        if model_id != descriptor.name:
            message = f"the model {model_id!r} is not served here: this server serves {descriptor.name!r}"
            raise OpenAIError(404, message, param="model", code="model_not_found")
        return jsonify(_model(descriptor))

    @app.post("/v1/images/generations")
    @_openai
    def generations():
        _check_key(state, "generate images")
        try:
            data = json_body(request)
        except BodyError as exc:
            raise OpenAIError(exc.status, exc.message) from None
        except RequestEntityTooLarge:
            cap = app.config["MAX_CONTENT_LENGTH"]
            raise OpenAIError(413, f"expected a request body of at most {cap} bytes") from None
        descriptor = state.monitor.deployment()
        req = images_request(data, descriptor)
        spec = state.jobs.submit(req.form, request.remote_addr or "?", bearer_token(), **req.queue)
        if req.stream:
            steps = partial_steps(spec.steps, req.partial_images)
            resp = Response(_events(state, spec.job_id, steps, req.size), mimetype="text/event-stream")
            resp.headers["Cache-Control"] = "no-cache"
            resp.headers["X-Accel-Buffering"] = "no"  # a proxy must not hold the partial images back
            return resp
        try:
            pngs = _result_pngs(state, spec.job_id)
        except WAIT_ERRORS as exc:
            raise _job_error(exc, spec.job_id) from None
        return jsonify(_images_body(spec.job_id, pngs, req))

    @app.get("/v1/images/<job_id>/<int:index>.png", endpoint="openai_image")
    @_openai
    def image(job_id: str, index: int):
        who = _check_key(state, "read results")
        try:
            check_job_id(job_id)
            status = visible(who, state.client, job_id)  # another user's job: 404, as no job
        except SchemaError as exc:
            raise OpenAIError(400, str(exc), param="job_id") from None
        except JobNotFoundError as exc:
            raise OpenAIError(404, str(exc), code="not_found") from None
        x = state.client.stored_result(status)
        if x is None:
            raise OpenAIError(
                404, f"job {job_id} has no images (status {status.status.value})", code="not_ready"
            )
        if not 0 <= index < len(x):
            raise OpenAIError(404, f"job {job_id} has images 0..{len(x) - 1}, not {index}", code="not_found")
        png = result_pngs(x[index : index + 1], result_value_range(state, status, x))[0]
        resp = Response(png, mimetype="image/png")
        resp.headers["Cache-Control"] = "private, max-age=3600"  # a result never changes
        return resp


def _images_body(job_id: str, pngs: list[bytes], req) -> dict:
    """OpenAI's images response for a finished job's PNGs: URLs of our per-image route, or base64."""
    if req.response_format == "url":
        images = [
            {"url": url_for("openai_image", job_id=job_id, index=i, _external=True)} for i in range(len(pngs))
        ]
    else:
        images = [{"b64_json": b64(png)} for png in pngs]
    body = {"created": int(time.time()), "data": images, "output_format": "png", "size": req.size}
    return {**body, "job_id": job_id}


def _model(descriptor) -> dict:
    return {
        "id": descriptor.name,
        "object": "model",
        "created": int(descriptor.published_at),
        "owned_by": "ddm",
    }


def _result_pngs(state, job_id: str) -> list[bytes]:
    """Wait for the job; its images as PNGs, drawn as the page draws them."""
    x = state.client.result(job_id, timeout=WAIT_S, on_degraded="ignore")
    return result_pngs(x, result_value_range(state, state.client.status(job_id), x))


def _events(state, job_id: str, steps: list[int], size: str):
    """The stream: partial images at `steps` from the job's frames, then one completed event per image;
    a job that gives no images ends it with an `error` event (OpenAI's error object)."""
    done = False
    try:
        frames = state.client.frames(job_id, timeout=WAIT_S)
        yield from partial_events(
            (state.hub.frame_payload(f) for f in frames if f.step in steps), steps, size
        )
        for i, png in enumerate(_result_pngs(state, job_id)):
            yield image_event(COMPLETED, png, size, i)
        done = True
    except WAIT_ERRORS as exc:
        done = True
        yield event("error", _job_error(exc, job_id).to_dict())
    finally:
        if not done:  # the client went away mid-stream: nobody will take the images
            with contextlib.suppress(Exception):  # best effort: the job finishes on its own otherwise
                state.client.cancel(job_id)
