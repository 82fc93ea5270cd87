"""With DDM_UI_TOKEN set the token covers every read, not only submitting and watching, and a wrong one
is counted per address on every path (watch included), so it cannot be guessed by reconnecting. The
production command (gunicorn) on the real Redis; Socket.IO through python-socketio's client and raw
websockets.

Before: GET /api/jobs, /api/jobs/<id>, result.png, result.pixels, /api/cluster and the "overview" event
answered anyone; a wrong token through watch counted only against its socket's watch budget (30 a
minute), which a new socket starts afresh: 1,000 guesses from one address were all looked at.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
import socketio

from tests.support.wire import Drain, WireSocket

TOKEN = "sesame-7f3a9c"
BUDGET = 30  # DDM_UI_JOBS_PER_MINUTE's default: the submit budget, and the wrong-token budget


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def done_job(fake):
    spec = fake.start_job(labels=(1, 2), steps=2)
    for step in (1, 2):
        fake.frame(spec, step)
    fake.finish(spec)
    return spec


def overview_events(url: str, auth: dict | None) -> list:
    """The "overview" events a Socket.IO client connecting with `auth` gets in its first 1.5 s."""
    got = []
    client = socketio.Client(reconnection=False)
    client.on("overview", lambda data: got.append(data))
    client.connect(url, auth=auth, transports=["websocket"], wait_timeout=10)
    try:
        client.sleep(1.5)  # the server pushes on connect, then every 2 s
    finally:
        client.disconnect()
    return got


def test_every_read_needs_the_token_and_works_with_it(production_ui, fake):
    ui = production_ui(DDM_UI_TOKEN=TOKEN)
    job = done_job(fake).job_id
    reads = [
        "/api/jobs",
        f"/api/jobs/{job}",
        f"/api/jobs/{job}/result.png",
        f"/api/jobs/{job}/result.pixels",
        "/api/cluster",
    ]
    for path in reads:
        status, body = get(ui.url + path)
        assert status == 401 and json.loads(body)["kind"] == "unauthorized", (path, status, body[:200])
        assert job.encode() not in body, body[:200]
        status, body = get(ui.url + path, TOKEN)
        assert status == 200, (path, status, body[:200])
    listed = json.loads(get(ui.url + "/api/jobs", TOKEN)[1])["jobs"]
    assert [j["job_id"] for j in listed] == [job]
    for path in ("/", "/healthz", "/api/config", "/static/app.js"):  # open: to load the page, type the token
        assert get(ui.url + path)[0] == 200, path

    assert overview_events(ui.url, None) == []  # a socket without the token is told nothing
    pushed = overview_events(ui.url, {"token": TOKEN})
    assert pushed and [j["job_id"] for j in pushed[0]["jobs"]] == [job]
    with pytest.raises(socketio.exceptions.ConnectionError, match="failed to connect"):  # refused
        overview_events(ui.url, {"token": "not-the-token"})


def test_without_a_token_set_reads_stay_open(production_ui, fake):
    ui = production_ui()
    job = done_job(fake).job_id
    assert get(ui.url + f"/api/jobs/{job}/result.png")[0] == 200
    assert overview_events(ui.url, None)


def test_a_thousand_wrong_tokens_through_watch_are_cut_off_after_the_budget(production_ui, fake):
    """40 connections one after another (each within its own watch budget), 25 wrong tokens each."""
    ui = production_ui(DDM_UI_TOKEN=TOKEN)
    job = done_job(fake).job_id
    kinds: list[str] = []
    for _ in range(40):
        s = WireSocket(ui.url)
        drain = Drain([s])
        for i in range(25):
            s.emit("watch", {"job_id": job, "token": f"guess-{len(kinds) + i:06d}"}, ack=i)
        try:
            deadline = time.monotonic() + 20
            while len(s.acks) < 25:
                assert time.monotonic() < deadline, s.acks
                time.sleep(0.01)
        finally:
            drain.stop()
            s.close()
        kinds += [s.acks[i]["kind"] for i in range(25)]
    assert len(kinds) == 1000
    assert kinds[:BUDGET] == ["unauthorized"] * BUDGET
    assert set(kinds[BUDGET:]) == {"rate_limited"}, sorted(set(kinds[BUDGET:]))
    # the address stays refused, the right token too (or guessing would learn it), over HTTP as well
    status, body = get(ui.url + "/api/jobs", TOKEN)
    assert status == 429 and json.loads(body)["kind"] == "rate_limited", body[:200]
