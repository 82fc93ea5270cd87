"""Submitting through the production server (gunicorn's gevent worker): the UI publishes to RabbitMQ with
pika's BlockingConnection (ddm.client), whose socket gevent has patched, over HTTP and over Socket.IO,
twice each (the connection is reused). Real Redis and RabbitMQ."""

from __future__ import annotations

import json
import urllib.request

import socketio

TOKEN = "sesame-7f3a9c"
JOB = {"labels": [3], "n_per_label": 1, "steps": 2, "seed": 1}


def post_job(url: str) -> dict:
    req = urllib.request.Request(
        url + "/api/jobs",
        data=json.dumps(JOB).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 201
        return json.loads(resp.read())


def test_jobs_are_queued_over_http_and_socket_io(production_ui, fake):
    fake.all_workers()
    ui = production_ui(DDM_UI_TOKEN=TOKEN)
    ids = [post_job(ui.url)["job_id"] for _ in range(2)]
    client = socketio.Client(reconnection=False)
    client.connect(ui.url, auth={"token": TOKEN}, transports=["websocket"], wait_timeout=10)
    try:
        for _ in range(2):
            ack = client.call("submit", {**JOB, "token": TOKEN}, timeout=20)
            assert ack["ok"], ack
            ids.append(ack["job_id"])
    finally:
        client.disconnect()
    assert len(set(ids)) == 4
    assert all(fake.r.exists(fake.names.job(job_id)) for job_id in ids)  # queued on the test prefix
