"""HTTP routes, on the real Redis and RabbitMQ (unique prefix)."""

from __future__ import annotations

import io
import posixpath
import re

import pytest
from PIL import Image

from tests.support.fakes import write_fake_deployment, write_random_deployment
from tests.support.services import amqp_channel


def test_the_page_is_self_contained_and_escaped(make_app, tmp_path):
    evil = '<img src=x onerror="alert(1)">'
    app = make_app(deployment=write_fake_deployment(tmp_path / "evil", name=evil))
    resp = app.test_client().get("/")
    assert resp.status_code == 200
    html = resp.get_data(as_text=True)
    assert evil not in html and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html  # Jinja autoescape
    assert 'id="job-form"' in html and 'id="strip"' in html and 'id="nodes"' in html
    assert "/static/socket.io.min.js" in html and "http://" not in html and "https://" not in html  # no CDN
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    for path in ("/static/socket.io.min.js", "/static/app.js", "/static/app.css"):
        assert app.test_client().get(path).status_code == 200, path
    js = app.test_client().get("/static/app.js").get_data(as_text=True)
    assert ".innerHTML" not in js and ".outerHTML" not in js and "insertAdjacentHTML" not in js  # text only


def test_every_module_the_page_imports_is_served_as_javascript_and_text_only(make_app):
    """The page is native ES modules (no build step): each <script type="module"> and every module it
    imports, followed from the page, is served from /static/ with a JavaScript type and puts text only."""
    http = make_app().test_client()
    html = http.get("/").get_data(as_text=True)
    todo = re.findall(r'<script type="module" src="(/static/[^"]+)"', html)
    assert todo == ["/static/app.js", "/static/weights.js"]
    seen = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        resp = http.get(path)
        assert resp.status_code == 200 and "javascript" in resp.mimetype, (path, resp.status, resp.mimetype)
        js = resp.get_data(as_text=True)
        assert ".innerHTML" not in js and ".outerHTML" not in js and "insertAdjacentHTML" not in js, path
        for spec in re.findall(r'^import (?:[^"]* from )?"(\.{1,2}/[^"]+)";', js, re.M):
            todo.append(posixpath.normpath(posixpath.join(posixpath.dirname(path), spec)))
    assert len(seen) > 10 and "/static/js/job.js" in seen, sorted(seen)


def test_config_cluster_and_health(make_app, fake):
    fake.all_workers()
    app = make_app()
    http = app.test_client()
    cfg = http.get("/api/config").get_json()
    assert cfg["deployment"]["strategies"] == ["oracle", "top1", "topk:2", "full"]
    jax = {"id": 1, "framework": "jax", "device": "cpu", "classes": [5, 6, 7, 8, 9], "cluster": "?"}
    jax["trained_on"] = "5-9"
    expert = cfg["deployment"]["experts"][1]
    assert {k: expert[k] for k in jax} == jax
    # its checkpoint's card (a legacy meta's: the seed's UNet on flow velocity), in the panel's words
    assert expert["card_text"] == "UNet · Flax · flow velocity"
    assert "objective flow-velocity" in expert["card_detail"]
    assert cfg["deployment"]["sample_space"]["shape"] == [1, 32, 32]
    assert cfg["deployment"]["null_label"] == 10
    assert cfg["deployment"]["class_names"] == [str(y) for y in range(10)] and cfg["deployment_error"] is None
    assert cfg["jobs_per_minute"] == 30

    # queue depth straight from RabbitMQ (passive declare), no management API
    from ddm.runtime.amqp import declare_topology

    with amqp_channel() as ch:
        declare_topology(ch, fake.names, [0])
        for _ in range(3):
            ch.basic_publish("", fake.names.expert_queue(0), b"x")
    snap = http.get("/api/cluster").get_json()
    assert snap["queues"]["0"] == {"messages": 3, "consumers": 0}
    assert snap["queues"]["1"] is None  # not declared yet
    assert snap["queues"]["jobs"] == {"messages": 0, "consumers": 0}
    alive = {w["worker_id"]: w["alive"] for w in snap["workers"]}
    assert alive == {"w-router": True, "w-e0": True, "w-e1": True}

    fake.r.delete(fake.names.worker("w-e1"))  # its heartbeat expired
    snap = http.get("/api/cluster").get_json()
    gone = next(w for w in snap["workers"] if w["worker_id"] == "w-e1")
    assert gone["alive"] is False and gone["framework"] == "jax"  # still shown, as gone
    assert snap["errors"] == []

    health = http.get("/healthz")
    assert health.status_code == 200 and health.get_json()["ok"] is True


def test_post_job_and_read_it_back(make_app, fake):
    fake.all_workers()
    http = make_app(jobs_per_minute=3).test_client()
    assert http.post("/api/jobs", data="nope").status_code == 415  # not declared JSON
    bad = http.post("/api/jobs", json={"labels": [1], "steps": 5000})
    assert bad.status_code == 400 and bad.get_json()["kind"] == "bad_input"
    assert "steps" in bad.get_json()["error"]
    xss = http.post("/api/jobs", json={"labels": [1], "strategy": "<script>alert(1)</script>"})
    assert xss.status_code == 400 and xss.headers["Content-Type"].startswith("application/json")
    ok = http.post("/api/jobs", json={"labels": [2, 9], "steps": 4, "strategy": "oracle", "seed": 5})
    assert ok.status_code == 201, ok.get_json()
    job_id = ok.get_json()["job_id"]
    job = http.get(f"/api/jobs/{job_id}").get_json()
    assert job["status"] == "queued" and job["labels"] == [2, 9] and job["seed"] == 5 and job["cols"] == 2
    assert [j["job_id"] for j in http.get("/api/jobs").get_json()["jobs"]] == [job_id]
    for _ in range(2):  # the refused requests above spent nothing: two more fit in the budget of 3
        unseeded = http.post("/api/jobs", json={"labels": [1], "steps": 2, "strategy": "oracle"})
        assert unseeded.status_code == 201
        assert unseeded.get_json()["spec"]["seed"] == 0, "no seed: 0, as the form and the CLI (issue 40)"
    limited = http.post("/api/jobs", json={"labels": [1]})
    assert limited.status_code == 429 and "Retry-After" in limited.headers
    assert "at most 3 per minute" in limited.get_json()["error"]
    assert http.get("/api/jobs/nosuchjob").status_code == 404
    assert http.get("/api/jobs/bad%20id").status_code == 400


def test_result_png(make_app, fake):
    http = make_app().test_client()
    spec = fake.start_job(labels=(3, 8, 3, 8), steps=2)
    fake.frame(spec, 1)
    running = http.get(f"/api/jobs/{spec.job_id}/result.png")
    assert running.status_code == 404 and running.get_json()["kind"] == "not_ready"
    fake.frame(spec, 2)
    fake.finish(spec)
    resp = http.get(f"/api/jobs/{spec.job_id}/result.png?download=1")
    assert resp.status_code == 200 and resp.mimetype == "image/png"
    assert resp.headers["Content-Disposition"] == f'attachment; filename="ddm-{spec.job_id}.png"'
    img = Image.open(io.BytesIO(resp.data))
    assert img.size == (3 * (2 * 34 + 2), 3 * (2 * 34 + 2))  # 2 x 2 grid (one column per digit), x3
    small = Image.open(io.BytesIO(http.get(f"/api/jobs/{spec.job_id}/result.png?scale=1").data))
    assert small.size == (70, 70)

    failed = fake.start_job(steps=2)
    fake.fail(failed, "a latent left float16's range")
    resp = http.get(f"/api/jobs/{failed.job_id}/result.png")
    assert resp.status_code == 409 and "float16" in resp.get_json()["error"]


def offered_strategies(html: str) -> list[str]:
    select = html[html.index('<select id="strategy">') : html.index("</select>")]
    return re.findall(r'<option value="([^"]*)"', select)


@pytest.mark.parametrize(
    ("router", "classes", "strategies"),
    [
        ("oracle", (range(0, 4), range(4, 7), range(7, 10)), ["oracle", "top1", "topk:2", "topk:3", "full"]),
        ("label-prior", (range(0, 6), range(3, 9), range(5, 10)), ["top1", "topk:2", "topk:3", "full"]),
    ],
)
def test_the_page_offers_exactly_what_the_serving_deployment_accepts(
    make_app, tmp_path, router, classes, strategies
):
    experts = [(f"e{k}", "torch", c, k) for k, c in enumerate(classes)]
    deployment = write_random_deployment(tmp_path / router, experts, router=router)
    app = make_app(deployment=deployment)  # its router's descriptor is in Redis, nothing else
    html = app.test_client().get("/").get_data(as_text=True)
    assert offered_strategies(html) == strategies
    default = "oracle" if router == "oracle" else "top1"
    assert f'<option value="{default}" selected>' in html
    cfg = app.test_client().get("/api/config").get_json()["deployment"]
    assert cfg["strategies"] == strategies and cfg["default_strategy"] == default
    assert [e["classes"] for e in cfg["experts"]] == [list(c) for c in classes]


def test_no_router_serving_is_said_plainly_and_refuses_submits(make_app, fake):
    fake.all_workers()
    app = make_app(deployment=None)
    http = app.test_client()
    html = http.get("/").get_data(as_text=True)
    assert "no router serving" in html and "ddm worker router" in html
    # no digits offered for a deployment nobody serves, and Generate says why it is off (issue 40)
    assert 'name="label"' not in html and 'id="submit" disabled title="no router serves' in html
    cfg = http.get("/api/config").get_json()
    assert cfg["deployment"] is None and "no router is serving under prefix" in cfg["deployment_error"]
    resp = http.post("/api/jobs", json={"labels": [1], "steps": 4})
    assert resp.status_code == 503 and resp.get_json()["kind"] == "no_deployment"
    assert "`ddm up` / `ddm worker router`" in resp.get_json()["error"]
    assert http.get("/api/cluster").get_json()["deployment"] is None


def test_class_names_come_from_the_descriptor(make_app, fake, fake_deployment):
    app = make_app(deployment=None)
    names = tuple(f"item-{y}" for y in range(10))
    fake.publish(fake_deployment, class_names=names, sample_space=None)  # the legacy space, renamed
    html = app.test_client().get("/").get_data(as_text=True)
    assert all(f"<span>{name}</span>" in html for name in names)
    assert 'class="classes classes-named" id="classes"' in html  # chips as wide as the names
    fake.publish(fake_deployment)  # digits: the five-column grid
    assert 'class="classes" id="classes"' in app.test_client().get("/").get_data(as_text=True)


def test_a_result_is_drawn_in_the_range_its_job_recorded(make_app, fake):
    """A job is rendered from what it recorded (schema/jobs.py), not from whichever deployment serves now
    (issue 41, typed jobs): zeros of a job in [0, 1] are black, though the serving space is [-1, 1]."""
    from ddm.schema.messages import JobSpec
    from ddm.schema.resolved import ResolvedJob
    from ddm.schema.sample_space import LEGACY, SampleSpace

    http = make_app().test_client()
    spec = JobSpec.new([3], steps=1, strategy="oracle", guidance=1.0)
    unit = SampleSpace(LEGACY.shape, (0.0, 1.0), LEGACY.num_classes, LEGACY.class_names)
    fake.store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec, unit), spec, deployment="unit")
    fake.finish(spec)  # zeros
    png = Image.open(io.BytesIO(http.get(f"/api/jobs/{spec.job_id}/result.png?scale=1").data))
    assert png.getpixel((5, 5)) == 0, "drawn in [0, 1]: 0 is black (in [-1, 1] it would be mid-grey)"
    old = fake.start_job(labels=(3,), steps=1)  # the serving space, recorded as such: mid-grey
    fake.finish(old)
    png = Image.open(io.BytesIO(http.get(f"/api/jobs/{old.job_id}/result.png?scale=1").data))
    assert png.getpixel((5, 5)) in (127, 128)
