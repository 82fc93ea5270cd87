"""Socket.IO events (namespace "/").

browser -> server (each answers through the acknowledgement callback):
    "submit" {form fields, see jobs.parse_form} -> {"ok": true, "job_id", "spec"}
             (plus "token" when DDM_UI_TOKEN is set)
    "watch"  {"job_id"}                         -> {"ok": true, "job"}, then "job" and "frame" events
             (plus "token" when DDM_UI_TOKEN is set; limits: watch_gate.py)
    "unwatch"                                   -> {"ok": true}
    a refusal answers {"ok": false, "kind", "error"} (kinds: see jobs.KIND_STATUS, plus not_found;
    too_many_watches and rate_limited carry "retry_after_s" when waiting helps)

server -> browser:
    "overview" {"cluster", "jobs"}   on connect, then every few seconds
    "job"      job status payload    when watching starts, on each status change, and at the end
    "frame"    one denoising step    replayed from the start, then live, in step order, once each
"""

from __future__ import annotations

import logging

from flask import request
from flask_socketio import SocketIO, emit

from ddm.client.errors import JobNotFoundError
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.errors import SchemaError, ServiceUnavailableError
from ddm.webui.jobs import SubmitError, split_token

log = logging.getLogger(__name__)


def _fail(kind: str, message: str) -> dict:
    return {"ok": False, "kind": kind, "error": message}


def register_events(socketio: SocketIO, state) -> None:
    @socketio.on("connect")
    def on_connect(auth=None):
        state.client_connected()
        try:
            emit("overview", state.overview())
        except Exception:  # noqa: BLE001 - the periodic push will retry
            log.exception("overview on connect failed")

    @socketio.on("disconnect")
    def on_disconnect(reason=None):
        state.hub.leave(request.sid)  # nothing of the socket is kept
        state.client_disconnected()

    @socketio.on("submit")
    def on_submit(data=None):
        try:
            form, token = split_token(data)
            spec = state.jobs.submit(form, request.remote_addr or "?", token)
        except SubmitError as exc:
            return exc.to_dict()
        except Exception as exc:  # noqa: BLE001 - say it plainly rather than drop the ack
            log.exception("submit failed")
            return _fail("unavailable", f"could not submit the job: {type(exc).__name__}: {exc}")
        return {"ok": True, "job_id": spec.job_id, "spec": spec.to_dict()}

    @socketio.on("watch")
    def on_watch(data=None):
        data, token = split_token(data)
        job_id = data.get("job_id") if isinstance(data, dict) else data
        try:
            job = state.hub.watch(request.sid, job_id, request.remote_addr or "?", token)
        except SubmitError as exc:
            return exc.to_dict()
        except SchemaError as exc:
            return _fail("bad_input", str(exc))
        except JobNotFoundError:
            return _fail("not_found", f"no job {job_id} (never submitted here, or expired)")
        except (*REDIS_CONNECTION_ERRORS, ServiceUnavailableError) as exc:
            return _fail("unavailable", f"Redis unreachable: {exc}")
        return {"ok": True, "job": job}

    @socketio.on("unwatch")
    def on_unwatch(data=None):
        state.hub.unwatch(request.sid)
        return {"ok": True}
