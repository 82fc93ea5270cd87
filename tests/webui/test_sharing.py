"""A UI others can share: the rate limit per client behind trusted proxies (DDM_UI_TRUSTED_PROXIES), an
access token for submitting (DDM_UI_TOKEN), and the settings that carry them. Real Redis and RabbitMQ
(unique prefix); the HTTP API through Flask's test client, Socket.IO through Flask-SocketIO's."""

from __future__ import annotations

import pytest

from ddm.schema.errors import ConfigError
from ddm.webui.config import UIConfig
from tests.support.socketio import connect

TOKEN = "sesame-7f3a9c"
JOB = {"labels": [2], "steps": 2, "strategy": "oracle", "seed": 1}


def _post(http, client_ip: str, **headers):
    return http.post("/api/jobs", json=JOB, headers={"X-Forwarded-For": client_ip, **headers})


@pytest.mark.parametrize(("proxies", "separate"), [(1, True), (0, False)])
def test_the_rate_limit_is_per_client_only_behind_trusted_proxies(make_app, fake, proxies, separate):
    fake.all_workers()
    http = make_app(jobs_per_minute=1, trusted_proxies=proxies).test_client()
    assert _post(http, "203.0.113.7").status_code == 201
    other = _post(http, "198.51.100.9")  # another client, through the same proxy (the test client's address)
    assert other.status_code == (201 if separate else 429), other.get_json()
    again = _post(http, "203.0.113.7")
    assert again.status_code == 429 and "at most 1 per minute" in again.get_json()["error"]


def test_trusted_proxies_reach_socket_io_submits(ui_server, fake, fake_deployment):
    """Through a real server: Flask-SocketIO's test client does not pass the WSGI middleware."""
    import socketio

    fake.publish(fake_deployment)
    fake.all_workers()
    url = ui_server(DDM_UI_TRUSTED_PROXIES="1", DDM_UI_JOBS_PER_MINUTE="1")
    acks = []
    for ip in ("203.0.113.7", "198.51.100.9", "203.0.113.7"):
        client = socketio.Client(reconnection=False)
        client.connect(url, headers={"X-Forwarded-For": ip}, transports=["websocket"], wait_timeout=10)
        acks.append(client.call("submit", JOB, timeout=20))
        client.disconnect()
    assert [a["ok"] for a in acks] == [True, True, False], acks
    assert acks[2]["kind"] == "rate_limited"


def test_a_token_guards_submits_over_http(make_app, fake):
    fake.all_workers()
    http = make_app(token=TOKEN).test_client()
    for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {TOKEN}"}):
        resp = http.post("/api/jobs", json=JOB, headers=headers)
        assert resp.status_code == 401 and resp.get_json()["kind"] == "unauthorized", headers
        assert TOKEN not in resp.get_data(as_text=True)
    ok = http.post("/api/jobs", json=JOB, headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 201, ok.get_json()
    job_id = ok.get_json()["job_id"]
    assert http.get(f"/api/jobs/{job_id}").status_code == 401  # reading needs it too (test_token_reads.py)
    assert http.get("/api/config").get_json()["token_required"] is True
    assert 'id="token"' in http.get("/").get_data(as_text=True)  # the page asks for it


def test_a_token_guards_submits_over_socket_io(make_app, fake):
    fake.all_workers()
    client = connect(make_app(token=TOKEN))
    refused = client.emit("submit", JOB, callback=True)
    assert refused["ok"] is False and refused["kind"] == "unauthorized" and "no token" in refused["error"]
    wrong = client.emit("submit", {**JOB, "token": "nope-nope"}, callback=True)
    assert wrong["kind"] == "unauthorized" and "a wrong token" in wrong["error"]
    assert client.emit("submit", {**JOB, "token": TOKEN}, callback=True)["ok"]
    client.disconnect()


def test_without_a_token_anyone_submits_and_the_page_has_no_token_field(make_app, fake):
    fake.all_workers()
    http = make_app().test_client()
    assert http.post("/api/jobs", json=JOB).status_code == 201
    assert http.get("/api/config").get_json()["token_required"] is False
    assert 'id="token"' not in http.get("/").get_data(as_text=True)


def test_ui_settings_from_the_environment():
    env = {"DDM_UI_TRUSTED_PROXIES": "2", "DDM_UI_TOKEN": TOKEN, "DDM_UI_BIND": "0.0.0.0:8000"}
    config = UIConfig.from_env(env)
    assert (config.trusted_proxies, config.token) == (2, TOKEN)
    assert (config.bind, config.threads) == ("0.0.0.0:8000", 100)
    assert TOKEN not in repr(config)
    for bad in ({"DDM_UI_TRUSTED_PROXIES": "-1"}, {"DDM_UI_TOKEN": "short"}, {"DDM_UI_BIND": "8000"}):
        with pytest.raises(ConfigError):
            UIConfig.from_env(bad)
