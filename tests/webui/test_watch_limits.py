"""Who may watch, and how much: the token (DDM_UI_TOKEN), watch requests per socket per minute
(DDM_UI_WATCHES_PER_MINUTE), sockets watching at once per address (DDM_UI_VIEWERS_PER_ADDRESS), and
nothing kept once a socket leaves. Socket.IO through Flask-SocketIO's test client, on the real Redis."""

from __future__ import annotations

from tests.support.socketio import connect, steps_of, wait_for

TOKEN = "sesame-7f3a9c"


def test_watching_needs_the_token_when_one_is_set(make_app, fake):
    spec = fake.start_job(steps=2)
    fake.frame(spec, 1)
    client = connect(make_app(token=TOKEN))
    refused = client.emit("watch", {"job_id": spec.job_id}, callback=True)
    assert (
        refused["ok"] is False and refused["kind"] == "unauthorized" and "to watch jobs" in refused["error"]
    )
    wrong = client.emit("watch", {"job_id": spec.job_id, "token": "nope-nope"}, callback=True)
    assert wrong["kind"] == "unauthorized" and "a wrong token" in wrong["error"]
    assert steps_of(client.get_received()) == []  # nothing of the job was sent
    ok = client.emit("watch", {"job_id": spec.job_id, "token": TOKEN}, callback=True)
    assert ok["ok"], ok
    assert steps_of(wait_for(client, lambda g: steps_of(g) == [1])) == [1]
    client.disconnect()


def test_watch_requests_are_limited_per_socket(make_app, fake):
    app = make_app(watches_per_minute=3)
    spec = fake.start_job(steps=2)
    client = connect(app)
    for _ in range(3):
        assert client.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    over = client.emit("watch", {"job_id": spec.job_id}, callback=True)
    assert over["ok"] is False and over["kind"] == "too_many_watches", over
    assert "at most 3 per minute from one connection" in over["error"] and 0 < over["retry_after_s"] <= 60
    unknown = client.emit("watch", {"job_id": "nosuchjob"}, callback=True)
    assert unknown["kind"] == "too_many_watches"  # every request counts, refused ones too
    other = connect(app)  # another socket has a budget of its own
    assert other.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    client.disconnect()
    other.disconnect()


def test_sockets_watching_at_once_are_limited_per_address(make_app, fake):
    app = make_app(viewers_per_address=2)
    spec = fake.start_job(steps=2)
    first, second, third = connect(app), connect(app), connect(app)  # all from 127.0.0.1
    assert first.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    assert second.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    assert second.emit("watch", {"job_id": spec.job_id}, callback=True)[
        "ok"
    ]  # watching again is no new viewer
    over = third.emit("watch", {"job_id": spec.job_id}, callback=True)
    assert over["kind"] == "too_many_watches" and "at most 2 connections from one address" in over["error"]
    first.disconnect()
    assert third.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    second.disconnect()
    third.disconnect()


def test_nothing_is_kept_once_the_sockets_leave(make_app, fake):
    app = make_app()
    state = app.extensions["ddm"]
    specs = [fake.start_job(steps=3) for _ in range(3)]
    for spec in specs:
        fake.frame(spec, 1)
    clients = [connect(app) for _ in range(6)]
    for i, client in enumerate(clients):
        assert client.emit("watch", {"job_id": specs[i % 3].job_id}, callback=True)["ok"]
    for client in clients:
        wait_for(client, lambda g: steps_of(g) == [1])
    assert state.hub.stats() == {"tailers": 3, "viewers": 6}
    for client in clients:
        client.disconnect()
    hub = state.hub
    assert hub.stats() == {"tailers": 0, "viewers": 0}
    assert hub.per_address == {} and hub.replayer.pending() == 0
    assert hub.gate._rate.keys() == 0  # the sockets' watch budgets are forgotten too
