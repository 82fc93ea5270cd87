"""POST /api/jobs: each bad body gets its own 4xx that says what was expected and what arrived, and a
refused request does not spend the address's submit budget. Real Redis and RabbitMQ (unique prefix)."""

from __future__ import annotations

import pytest

GOOD = {"labels": [2], "steps": 2, "strategy": "oracle", "seed": 1}
JSON = "application/json"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "words"),
    [
        ('{"labels": [1], "seed": ' + "7" * 5000 + "}", JSON, 400, "numbers of at most 4300 digits"),
        (b'{"labels": [1], "strategy": "\xff"}', JSON, 400, "UTF-8, got the byte 0xff at byte 29"),
        ('{"labels": [1]}', "text/plain", 415, "expected Content-Type: application/json, got 'text/plain'"),
        ('{"labels": [1]}', None, 415, "expected Content-Type: application/json, got 'none'"),
        ("", JSON, 400, "expected a JSON object, got an empty body"),
        ("{labels: [1]}", JSON, 400, "not JSON at line 1 column 2: Expecting property name"),
        ("[1, 2]", JSON, 400, "expected a JSON object with the job's fields, got 'list'"),
    ],
    ids=["long-integer", "invalid-utf8", "text-plain", "no-content-type", "empty", "not-json", "array"],
)
def test_each_bad_body_says_what_arrived(make_app, fake, body, content_type, status, words):
    http = make_app().test_client()
    resp = http.post("/api/jobs", data=body, content_type=content_type)
    assert resp.status_code == status, resp.data[:300]
    out = resp.get_json()
    assert out["ok"] is False and out["kind"] == "bad_input", out
    assert words in out["error"], out["error"]


def test_refused_requests_do_not_spend_the_submit_budget(make_app, fake):
    http = make_app(jobs_per_minute=2).test_client()
    refused = [
        http.post("/api/jobs", data="7" * 5000, content_type=JSON),  # does not parse
        http.post("/api/jobs", json={**GOOD, "steps": 0}),  # bad input
        http.post("/api/jobs", json={**GOOD, "labels": [11]}),
        http.post("/api/jobs", json=GOOD),  # no live worker yet
        http.post("/api/jobs", json=[GOOD]),
    ]
    assert [r.status_code for r in refused] == [400, 400, 400, 503, 400]
    fake.all_workers()
    assert http.post("/api/jobs", json=GOOD).status_code == 201  # the whole budget is still there
    assert http.post("/api/jobs", json=GOOD).status_code == 201
    limited = http.post("/api/jobs", json=GOOD)
    assert limited.status_code == 429 and "at most 2 per minute" in limited.get_json()["error"]


def test_a_wrong_token_still_spends_the_budget(make_app, fake):
    """Guessing the token must stay slow: each wrong one counts."""
    fake.all_workers()
    http = make_app(jobs_per_minute=2, token="sesame-7f3a9c").test_client()
    for _ in range(2):
        assert (
            http.post("/api/jobs", json=GOOD, headers={"Authorization": "Bearer guess-1234"}).status_code
            == 401
        )
    right = http.post("/api/jobs", json=GOOD, headers={"Authorization": "Bearer sesame-7f3a9c"})
    assert right.status_code == 429, right.get_json()
