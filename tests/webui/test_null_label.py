"""The UI's JSON API and the page's form on issue 40 item 3: an unconditional image is null (or
"unconditional"); the class count K as a number is refused with a 400 naming the range, on the real
Redis and RabbitMQ; the page's box still shows K's name and sends null."""

from __future__ import annotations

import pytest

from ddm.schema.flow import NULL_CLASS
from ddm.webui.jobs import SubmitError, parse_form


def test_the_form_reads_null_and_unconditional_and_refuses_k():
    assert parse_form({"labels": [None, 3], "n_per_label": 2}).labels == (3, None, 3, None)
    assert parse_form({"labels": ["unconditional"]}).labels == (None,)
    with pytest.raises(SubmitError, match=r"labels 0..9, or null \(or 'unconditional'\).*got 10"):
        parse_form({"labels": [NULL_CLASS]})


def test_the_api_refuses_k_and_queues_null(make_app, fake, fake_deployment):
    fake.all_workers()
    http = make_app().test_client()
    fake.publish(fake_deployment, router_kind="learned")  # as if a learned router served it
    refused = http.post("/api/jobs", json={"labels": [3, NULL_CLASS], "steps": 4, "strategy": "full"})
    assert refused.status_code == 400 and "labels 0..9, or null" in refused.get_json()["error"]
    ok = http.post("/api/jobs", json={"labels": [None], "n_per_label": 2, "steps": 4, "strategy": "full"})
    assert ok.status_code == 201, ok.get_json()
    job = http.get(f"/api/jobs/{ok.get_json()['job_id']}").get_json()
    assert job["labels"] == [None, None] and job["label_names"] in (None, ["unconditional"] * 2)


def test_the_page_sends_null_for_its_unconditional_box(make_app, fake):
    js = make_app().test_client().get("/static/js/form.js").get_data(as_text=True)
    assert "y === state.nullLabel ? null : y" in js
