"""Unconditional jobs through the web UI's routes, on the real Redis and RabbitMQ: the form takes null (the
null label, 10 inside; the number 10 is refused: tests/webui/test_null_label.py), an oracle job with one
is refused with the descriptor's message, a router strategy queues it; the page offers the
"unconditional" choice and loads the weights chart (weights.js, text only)."""

from __future__ import annotations

from ddm.schema.flow import NULL_CLASS
from ddm.webui.jobs import labels_text, parse_form
from ddm.webui.payloads import grid_cols


def test_an_oracle_job_with_a_null_label_is_refused_and_a_router_strategy_queues_it(
    make_app, fake, fake_deployment
):
    fake.all_workers()
    http = make_app().test_client()
    table = http.post("/api/jobs", json={"labels": [None], "steps": 4, "strategy": "full"})
    assert table.status_code == 400 and "need a router that reads x_t" in table.get_json()["error"]
    fake.publish(fake_deployment, router_kind="learned")  # as if a learned router served it
    refused = http.post("/api/jobs", json={"labels": [3, None], "steps": 4, "strategy": "oracle"})
    assert refused.status_code == 400, refused.get_json()
    body = refused.get_json()
    assert body["kind"] == "bad_input"
    assert "strategy 'oracle' routes each image by its label" in body["error"]
    assert "null label 10 (unconditional)" in body["error"]

    ok = http.post("/api/jobs", json={"labels": [None], "n_per_label": 3, "steps": 4, "strategy": "full"})
    assert ok.status_code == 201, ok.get_json()
    job = http.get(f"/api/jobs/{ok.get_json()['job_id']}").get_json()
    assert job["labels"] == [None] * 3 and job["strategy"] == "full" and job["cols"] == 2

    unset = http.post("/api/jobs", json={"labels": [None], "steps": 4, "strategy": None})
    assert unset.status_code == 201, unset.get_json()  # the router will resolve it to top1, not oracle


def test_the_form_and_the_names():
    spec = parse_form({"labels": [None, 3], "n_per_label": 2})
    assert spec.labels == (3, None, 3, None)  # row by row: one column per label
    assert labels_text(None, spec.labels) == "3, unconditional"
    assert labels_text(None, [NULL_CLASS]) == "unconditional"
    assert grid_cols([NULL_CLASS] * 4) == 2 and grid_cols([*range(10), NULL_CLASS]) == 11  # 2 x 2: a grid
    assert grid_cols([NULL_CLASS, 3] * 2) == 2  # one column per label


def test_the_page_offers_unconditional_and_loads_the_weights_chart(make_app, fake):
    app = make_app()
    http = app.test_client()
    html = http.get("/").get_data(as_text=True)
    assert 'id="unconditional" value="10"' in html and ">unconditional</span>" in html
    assert 'id="weights-chart"' in html and "/static/weights.js" in html
    assert html.index("/static/app.js") < html.index("/static/weights.js")  # it reads app.js's window.ddmPage
    js = http.get("/static/weights.js")
    assert js.status_code == 200
    text = js.get_data(as_text=True)
    assert ".innerHTML" not in text and ".outerHTML" not in text and "insertAdjacentHTML" not in text
    assert "fetch(" not in text and "http" not in text.replace("http://www.w3.org/2000/svg", "")
    cfg = http.get("/api/config").get_json()["deployment"]
    assert (cfg["null_label"], cfg["null_name"]) == (NULL_CLASS, "unconditional")
    assert cfg["unconditional_strategy"] == "top1"  # the default is the oracle: the CLI's rule


def test_a_frame_says_who_served_each_image_from_the_unrounded_weights():
    import numpy as np

    from ddm.schema.messages import Frame
    from ddm.webui.payloads import frame_payload

    x = np.zeros((2, 1, 32, 32), np.float32)
    weights = np.array([[0.9996, 0.0004], [0.0, 1.0]], np.float32)
    payload = frame_payload(Frame.from_latent("j1", 3, 0.3, x, (0, 1), weights, 5.0))
    assert payload["weights"] == [[1.0, 0.0], [0.0, 1.0]]  # as shown, to 3 decimals
    assert payload["served"] == [[0, 1], [1]]  # expert 1 computed image 0's velocity all the same
