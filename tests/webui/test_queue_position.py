"""The page's view of a queued job's place: the "job" event carries the position and the estimate when
watching starts, and a new one when the job moves up (a job ahead started); /api/jobs/<id> too. Real
Redis and RabbitMQ, no router: the jobs wait in ddm.jobs, the fake cluster's store starts one."""

from __future__ import annotations

import pytest

from ddm.client.client import Client
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from tests.support.browser import chromium_page
from tests.support.socketio import connect, wait_for


def queue_events(events: list[dict]) -> list[dict | None]:
    return [e["args"][0].get("queue") for e in events if e["name"] == "job"]


def test_a_watched_queued_job_shows_its_place_and_moves_up(make_app, fake):
    app = make_app()
    with Client(settings=fake.settings) as client:
        ids = [
            client.submit(
                JobSpec.new([3], steps=4, strategy="oracle", guidance=1.0, seed=i), check=False, priority=p
            )
            for i, p in enumerate([0, 0, 7])
        ]
    watcher = connect(app)
    ack = watcher.emit("watch", {"job_id": ids[1]}, callback=True)
    assert ack["ok"]
    place = ack["job"]["queue"]
    # the priority-7 job goes first, then ids[0], then ids[1]: third of three; nothing measured yet
    assert (place["position"], place["queued"], place["ahead"]) == (3, 3, 2)
    assert place["start_in_s"] is None and place["measured"] == 0
    assert place["text"].startswith("position 3 of 3; no estimate yet")

    spec = fake.store.job(ids[2]).spec  # a router starts the first one: ids[1] moves up to 2 of 2
    fake.store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec), spec)
    got = wait_for(watcher, lambda g: any(q and q["position"] == 2 for q in queue_events(g)))
    last = queue_events(got)[-1]
    assert (last["position"], last["queued"], last["ahead"]) == (2, 2, 1)

    http = app.test_client().get(f"/api/jobs/{ids[1]}").get_json()
    assert http["status"] == "queued" and http["queue"]["position"] == 2
    # one JSON shape of a place: the one `ddm status --json` prints (QueuePosition.to_dict)
    with Client(settings=fake.settings) as client:
        assert http["queue"] == client.queue_position(ids[1]).to_dict()
    running = app.test_client().get(f"/api/jobs/{ids[2]}").get_json()
    assert running["status"] == "running" and running["queue"] is None
    watcher.disconnect()


def test_get_job_reads_the_hubs_cached_places_and_writes_nothing(make_app, fake, monkeypatch):
    app = make_app()
    state = app.extensions["ddm"]
    with Client(settings=fake.settings) as client:
        ids = [client.submit(JobSpec.new([3], steps=4, seed=i), check=False) for i in range(3)]
    fake.r.zadd(fake.names.queue, {"stale-job": 0.5})  # a hash gone: skipped, pruned by the routers
    monkeypatch.setattr("ddm.webui.tail.QUEUE_EVERY_S", 60.0)  # however slow this machine: one reading
    reads = []
    real = state.client.queue_positions
    monkeypatch.setattr(state.client, "queue_positions", lambda **kw: reads.append(kw) or real(**kw))
    http = app.test_client()
    got = [http.get(f"/api/jobs/{ids[i % 3]}").get_json()["queue"]["position"] for i in range(30)]
    assert got == [1, 2, 3] * 10
    assert reads == [{"prune": False}]  # one reading of the queue (O(its length)) for 30 requests
    assert fake.r.zscore(fake.names.queue, "stale-job") == 0.5  # a GET writes nothing


@pytest.mark.browser
def test_the_page_shows_the_place_and_hides_it_once_the_job_runs(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)
    fake.all_workers()
    with Client(settings=fake.settings) as client:
        ids = [
            client.submit(JobSpec.new([3], steps=4, strategy="oracle", guidance=1.0, seed=i), check=False)
            for i in range(2)
        ]
    url = ui_server()
    with chromium_page() as page:
        page.goto(f"{url}#job={ids[1]}")
        page.wait_for_selector("#job-queue[data-position='2']", timeout=15_000)
        text = page.text_content("#job-queue")
        assert text == "In the queue: position 2 of 2; no estimate yet (no job ended in the last 15 min)."
        for job_id in ids:  # the one ahead starts (ids[1] moves up), then ids[1] itself
            spec = fake.store.job(job_id).spec
            fake.store.start(job_id, "w-router", 0, ResolvedJob.of(spec), spec)
            if job_id == ids[0]:
                page.wait_for_selector("#job-queue[data-position='1']", timeout=15_000)
                assert page.text_content("#job-queue").startswith("In the queue: position 1 of 1")
        page.wait_for_selector("#job-status.badge-running", timeout=15_000)
        assert page.is_hidden("#job-queue")
