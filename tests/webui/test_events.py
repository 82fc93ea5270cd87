"""Socket.IO events through Flask-SocketIO's test client, on the real Redis and RabbitMQ (unique prefix)."""

from __future__ import annotations

from tests.support.services import amqp_channel
from tests.support.socketio import connect, statuses, steps_of, wait_for


def test_connect_sends_the_overview(make_app, fake):
    fake.all_workers()
    client = connect(make_app())
    got = wait_for(client, lambda g: any(e["name"] == "overview" for e in g))
    overview = next(e for e in got if e["name"] == "overview")["args"][0]
    workers = {w["worker_id"]: w for w in overview["cluster"]["workers"]}
    assert workers["w-e0"]["alive"] and workers["w-e0"]["framework"] == "torch"
    assert workers["w-e1"]["expert_id"] == 1 and workers["w-router"]["role"] == "router"
    assert [e["framework"] for e in overview["cluster"]["experts"]] == ["torch", "jax"]
    assert overview["jobs"] == []
    client.disconnect()


def test_watch_replays_then_follows_in_order_for_early_and_late_viewers(make_app, fake):
    app = make_app()
    spec = fake.start_job(labels=(1, 7), steps=6)
    for step in (1, 2, 3):
        fake.frame(spec, step)
    early = connect(app)
    ack = early.emit("watch", {"job_id": spec.job_id}, callback=True)
    assert ack["ok"] and ack["job"]["status"] == "running" and ack["job"]["n"] == 2
    got = wait_for(early, lambda g: steps_of(g) == [1, 2, 3])
    first = next(e for e in got if e["name"] in ("job", "frame"))
    assert first["name"] == "job"  # the page learns the job's shape before its first frame
    frame = next(e for e in got if e["name"] == "frame")["args"][0]
    assert frame["n"] == 2 and len(frame["weights"]) == 2 and frame["experts"] == [0, 1]
    assert frame["weights"] == [[1.0, 0.0], [0.0, 1.0]] and frame["latency_ms"] == 12.5
    import base64

    assert len(base64.b64decode(frame["pixels"])) == 2 * 32 * 32

    fake.frame(spec, 4)
    late = connect(app)  # joins mid-stream: replay of 1..4, then live
    assert late.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    fake.frame(spec, 4)  # a resumed router rewrites the step it resumed at: skipped
    fake.frame(spec, 5)
    fake.frame(spec, 6)
    fake.finish(spec)
    early_all = got + wait_for(early, lambda g: "done" in statuses(g))
    late_all = wait_for(late, lambda g: "done" in statuses(g))
    assert steps_of(early_all) == [1, 2, 3, 4, 5, 6]
    assert steps_of(late_all) == [1, 2, 3, 4, 5, 6]
    done = [e for e in late_all if e["name"] == "job"][-1]["args"][0]
    assert done["result_png"] == f"/api/jobs/{spec.job_id}/result.png"
    assert late_all[-1]["name"] == "job"  # the final status comes after the last frame

    after = connect(app)  # after the end: everything replayed, then the final status
    assert after.emit("watch", {"job_id": spec.job_id}, callback=True)["ok"]
    after_all = wait_for(after, lambda g: steps_of(g) == [1, 2, 3, 4, 5, 6] and "done" in statuses(g))
    assert steps_of(after_all) == [1, 2, 3, 4, 5, 6]

    hub = app.extensions["ddm"].hub
    assert hub.stats() == {"tailers": 1, "viewers": 3}
    for c in (early, late, after):
        c.disconnect()
    assert hub.stats() == {"tailers": 0, "viewers": 0}


def test_switching_jobs_and_unknown_jobs(make_app, fake):
    app = make_app()
    a, b = fake.start_job(steps=3), fake.start_job(steps=3)
    fake.frame(a, 1)
    fake.frame(b, 1)
    client = connect(app)
    assert client.emit("watch", {"job_id": a.job_id}, callback=True)["ok"]
    # a's stored frame comes after the watch's answer: wait for it (a busy machine delivered b's first)
    got = wait_for(client, lambda g: any(f["name"] == "frame" for f in g))
    assert client.emit("watch", {"job_id": b.job_id}, callback=True)["ok"]  # leaves a's room
    fake.frame(a, 2)
    fake.frame(b, 2)
    got += wait_for(client, lambda g: [f["args"][0]["step"] for f in g if f["name"] == "frame"][-1:] == [2])
    frames = [(e["args"][0]["job_id"], e["args"][0]["step"]) for e in got if e["name"] == "frame"]
    assert frames == [(a.job_id, 1), (b.job_id, 1), (b.job_id, 2)]
    assert app.extensions["ddm"].hub.stats() == {"tailers": 1, "viewers": 1}

    missing = client.emit("watch", {"job_id": "nosuchjob"}, callback=True)
    assert missing == {"ok": False, "kind": "not_found", "error": missing["error"]}
    assert "nosuchjob" in missing["error"]
    bad = client.emit("watch", {"job_id": "../etc/passwd"}, callback=True)
    assert not bad["ok"] and bad["kind"] == "bad_input" and "job_id" in bad["error"]
    assert client.emit("unwatch", callback=True) == {"ok": True}
    client.disconnect()


def test_a_failed_job_says_why(make_app, fake):
    spec = fake.start_job(steps=4)
    fake.frame(spec, 1)
    fake.fail(spec, "expert 1 did not answer request x.1.1 after 5 sends")
    client = connect(make_app())
    client.emit("watch", {"job_id": spec.job_id}, callback=True)
    got = wait_for(client, lambda g: statuses(g) == ["failed", "failed"])  # on watch, and at the end
    assert [e["name"] for e in got if e["name"] != "overview"] == ["job", "frame", "job"]
    failed = [e for e in got if e["name"] == "job"][-1]["args"][0]
    assert failed["error"] == "expert 1 did not answer request x.1.1 after 5 sends"
    assert steps_of(got) == [1]
    client.disconnect()


def _form(**overrides):
    form = {"labels": "all", "n_per_label": 1, "steps": 20, "strategy": "oracle", "guidance": 1.0, "seed": 3}
    return {**form, **overrides}


def test_submit_validates_like_the_cli(make_app, fake):
    client = connect(make_app())
    cases = [
        (_form(labels=[]), "choose at least one label"),
        (_form(labels=[3, 11]), "labels 0..9"),
        (_form(steps=0), "steps"),
        (_form(steps="20"), "steps: expected an integer"),
        (_form(strategy="bogus"), "strategy"),
        (_form(strategy="topk:3"), "strategy in ['oracle', 'top1', 'topk:2', 'full']"),  # the descriptor's
        (_form(guidance=float("nan")), "guidance"),
        (_form(n_per_label=7), "10 labels x 7 per label = 70 images"),
        (_form(seed=-1), "seed"),
        ({**_form(), "evil": 1}, "only the fields"),
        ("not a dict", "JSON object"),
    ]
    for form, words in cases:
        ack = client.emit("submit", form, callback=True)
        assert ack["ok"] is False and ack["kind"] == "bad_input", (form, ack)
        assert words in ack["error"], (form, ack)
    client.disconnect()


def test_submit_needs_live_workers_then_queues_the_job(make_app, fake):
    client = connect(make_app())
    ack = client.emit("submit", _form(), callback=True)
    assert (
        ack["kind"] == "no_worker" and "no live worker for expert 0 (torch, trained on 0-4)" in ack["error"]
    )
    fake.beat("w-e0", expert_id=0)
    ack = client.emit("submit", _form(labels=[0, 1]), callback=True)
    assert ack["kind"] == "no_worker" and "router" in ack["error"]  # experts fine, no router
    ack = client.emit("submit", _form(labels=[8]), callback=True)
    assert ack["kind"] == "no_worker" and "expert 1 (jax, trained on 5-9)" in ack["error"]
    fake.beat("w-router", role="router")
    ack = client.emit("submit", _form(labels=[0, 1], n_per_label=2, steps=7, seed=None), callback=True)
    assert ack["ok"], ack
    spec = ack["spec"]
    assert spec["labels"] == [0, 1, 0, 1] and spec["steps"] == 7 and 0 <= spec["seed"] < 2**32
    h = fake.r.hgetall(fake.names.job(ack["job_id"]))
    assert h[b"status"] == b"queued" and h[b"steps"] == b"7"
    with amqp_channel() as ch:
        depth = ch.queue_declare(fake.names.jobs, passive=True).method.message_count
    assert depth == 1
    client.disconnect()


def test_submissions_are_rate_limited_per_address(make_app, fake):
    fake.all_workers()
    client = connect(make_app(jobs_per_minute=2))
    assert client.emit("submit", _form(steps=2), callback=True)["ok"]
    assert client.emit("submit", _form(steps=2), callback=True)["ok"]
    ack = client.emit("submit", _form(steps=2), callback=True)
    assert ack["kind"] == "rate_limited" and "at most 2 per minute" in ack["error"]
    assert 0 < ack["retry_after_s"] <= 60
    client.disconnect()


def test_a_latent_job_needs_a_live_decoder_worker_at_submit(make_app, fake):
    """As the client does (issue 36): a latent deployment's job is refused while no decoder beats,
    instead of running every step and failing at the end."""
    from ddm.schema.autoencoder_card import DecoderInfo, LatentPreview
    from ddm.schema.sample_space import SampleSpace
    from tests.support.descriptors import demo_descriptor

    app = make_app(deployment=None)
    preview = LatentPreview(((1.0,), (1.0,), (1.0,)), (0.0, 0.0, 0.0))
    decoder = DecoderInfo("ae-0123456789ab", SampleSpace((3, 32, 32), (-1.0, 1.0)), preview)
    fake.store.publish_descriptor(demo_descriptor(decoder=decoder), 60)
    for worker, fields in (("w-e0", {"expert_id": 0}), ("w-router", {"role": "router"})):
        fake.beat(worker, **fields)
    client = connect(app)
    ack = client.emit("submit", _form(labels=[0, 1]), callback=True)
    assert ack["kind"] == "no_worker" and "no live decoder worker" in ack["error"], ack
    assert "`ddm worker decoder`" in ack["error"]
    fake.beat("w-decoder", role="decoder")
    ack = client.emit("submit", _form(labels=[0, 1]), callback=True)
    assert ack["ok"], ack
    client.disconnect()
