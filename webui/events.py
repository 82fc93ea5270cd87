"""Socket.IO events (namespace "/").

With DDM_UI_TOKEN set or API keys on (access.py), a socket reads (gets "overview", may watch without a
token of its own) once it gave the token or a key: connect with auth {"token": TOKEN}, or the "auth"
event later. One that has not gets nothing, and may watch only with the token in the request; a wrong
token on connect refuses the connection (ConnectionRefusedError, its data the refusal below), and counts
against the address (access.py). Submitting is an action: its request carries the token, as over HTTP.

browser -> server (each answers through the acknowledgement callback):
    "auth"   {"token"}                          -> {"ok": true}, then "overview" events
    "submit" {form fields, see jobs.parse_form} -> {"ok": true, "job_id", "spec"}
             (plus "token" when DDM_UI_TOKEN is set)
    "watch"  {"job_id"}                         -> {"ok": true, "job"}, then "job" and "frame" events
             (plus "token" when DDM_UI_TOKEN is set and the socket connected without it; limits:
             watch_gate.py; a key user's watch of another's job is not_found, as for no job)
    "unwatch"                                   -> {"ok": true}
    a refusal answers {"ok": false, "kind", "error"} (kinds: see jobs.KIND_STATUS, plus not_found;
    too_many_watches and rate_limited carry "retry_after_s" when waiting helps)

server -> browser:
    "overview" {"cluster", "jobs"}   on connect, then every few seconds (to sockets that may read); a
                                     key user's: their own jobs, and "others" (the rest counted by status)
    "job"      job status payload    when watching starts, on each status change, and at the end
    "frame"    one denoising step    replayed from the start, then live, in step order, once each
"""

from __future__ import annotations

import logging

from flask import request
from flask_socketio import ConnectionRefusedError, SocketIO, emit, join_room

from ddm.client.errors import JobNotFoundError
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.errors import SchemaError, ServiceUnavailableError
from ddm.webui.jobs import SubmitError, split_token

log = logging.getLogger(__name__)
READERS = "readers"  # the room of the sockets that read everything (the token, an admin key, or none set)


def user_room(user: str) -> str:
    """The room of one key user's sockets: they get the overview of their own jobs (app.py)."""
    return f"user:{user}"


def _fail(kind: str, message: str) -> dict:
    return {"ok": False, "kind": kind, "error": message}


def _auth_token(auth: object) -> str | None:
    token = auth.get("token") if isinstance(auth, dict) else None
    return token if isinstance(token, str) and token else None


def register_events(socketio: SocketIO, state) -> None:
    readers = state.readers  # sid -> who, for the sockets that connected with a token or key (all: none set)

    def become_reader(token: str | None) -> None:
        """SubmitError unless `token` may read; then this socket gets the overview (its user's jobs, or all
        for an admin), now and every few s."""
        who = state.access.check(token, request.remote_addr or "?", "read jobs")
        readers[request.sid] = who
        join_room(READERS if who.admin else user_room(who.user))
        try:
            emit("overview", state.overview(who))
        except Exception:  # noqa: BLE001 - the periodic push will retry
            log.exception("overview on connect failed")

    @socketio.on("connect")
    def on_connect(auth=None):
        token = _auth_token(auth)
        if token is not None or not state.access.required:
            try:
                become_reader(token)
            except SubmitError as exc:
                raise ConnectionRefusedError(exc.message, exc.to_dict()) from None
        state.client_connected()

    @socketio.on("auth")
    def on_auth(data=None):
        try:
            become_reader(_auth_token(data))
        except SubmitError as exc:
            return exc.to_dict()
        return {"ok": True}

    @socketio.on("disconnect")
    def on_disconnect(reason=None):
        readers.pop(request.sid, None)
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
            address, who = request.remote_addr or "?", readers.get(request.sid)
            if who is not None and who.open and state.access.required:
                who = None  # it connected while the server was open: keys or a token are needed now
            job = state.hub.watch(request.sid, job_id, address, token, authenticated=who)
        except SubmitError as exc:
            return exc.to_dict()
        except SchemaError as exc:
            return _fail("bad_input", str(exc))
        except JobNotFoundError:  # the same words for another user's job
            return _fail("not_found", f"no job {job_id} (never submitted here, or expired)")
        except (*REDIS_CONNECTION_ERRORS, ServiceUnavailableError) as exc:
            return _fail("unavailable", f"Redis unreachable: {exc}")
        return {"ok": True, "job": job}

    @socketio.on("unwatch")
    def on_unwatch(data=None):
        state.hub.unwatch(request.sid)
        return {"ok": True}
