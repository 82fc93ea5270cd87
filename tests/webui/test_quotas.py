"""Per-key quotas (issue 39 part 4) on the real Redis and RabbitMQ: a key's rate of submits (a token bucket
in Redis) and its concurrent jobs. Going over is a 429 with Retry-After on every submit path (the JSON
API, the OpenAI endpoint), and nothing is queued; a request refused for another reason takes nothing;
two UI processes share one key's limits under 200 concurrent clients.

Before: `ddm keys create --rate 3/min --max-jobs 2` recorded the limits and nothing enforced them: a
fourth and a fifth submit in the same second were queued.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest

from ddm.schema.messages import JobStatus
from ddm.webui.keys import KeyStore

FORM = {"labels": [1], "n_per_label": 1, "steps": 4, "strategy": "oracle", "guidance": 1.0, "seed": 3}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def queued(fake) -> int:
    """How many jobs reached the queue under the test's prefix (Client.submit indexes each)."""
    return fake.r.zcard(fake.names.jobs_index)


@pytest.fixture
def quota_app(make_app, fake):
    """make_key(**limits) -> a submit key; the app with the workers beating and no per-address limit."""
    store = KeyStore(fake.r, fake.names)
    fake.all_workers()
    app = make_app(jobs_per_minute=100_000)
    return app, lambda user="alice", **limits: store.create(user, "submit", **limits)[1]


def test_a_keys_rate_refuses_with_retry_after_and_queues_nothing(quota_app, fake):
    app, make_key = quota_app
    http = app.test_client()
    key = make_key(rate_per_min=3)
    bad = http.post("/api/jobs", json={**FORM, "labels": [99]}, headers=bearer(key))
    assert bad.status_code == 400  # refused for its input: takes no token
    codes = [http.post("/api/jobs", json=FORM, headers=bearer(key)).status_code for _ in range(3)]
    assert codes == [201] * 3
    over = http.post("/api/jobs", json=FORM, headers=bearer(key))
    assert over.status_code == 429 and over.get_json()["kind"] == "rate_limited"
    assert "3 jobs a minute" in over.get_json()["error"]
    assert 1 <= int(over.headers["Retry-After"]) <= 21  # a token every 20 s
    assert queued(fake) == 3
    other = make_key("bob", rate_per_min=3)  # the bucket is the key's, not the address's
    assert http.post("/api/jobs", json=FORM, headers=bearer(other)).status_code == 201
    me = http.get("/api/me", headers=bearer(key)).get_json()
    assert (me["user"], me["quota"]["rate_per_min"]) == ("alice", 3)
    assert 0 <= me["quota"]["tokens"] < 0.1  # refills at 0.05 a second


def test_a_keys_concurrent_jobs_free_up_when_a_job_ends(quota_app, fake):
    app, make_key = quota_app
    http = app.test_client()
    key = make_key(max_jobs=2)
    ids = [http.post("/api/jobs", json=FORM, headers=bearer(key)).get_json()["job_id"] for _ in range(2)]
    over = http.post("/api/jobs", json=FORM, headers=bearer(key))
    assert over.status_code == 429 and "2 jobs queued or running at once" in over.get_json()["error"]
    assert int(over.headers["Retry-After"]) >= 1
    openai = http.post("/v1/images/generations", json={"prompt": "1", "n": 1}, headers=bearer(key))
    assert openai.status_code == 429 and openai.get_json()["error"]["code"] == "rate_limited"
    assert "Retry-After" in openai.headers
    assert queued(fake) == 2
    assert http.get("/api/me", headers=bearer(key)).get_json()["quota"]["active_jobs"] == 2
    fake.r.hset(fake.names.job(ids[0]), "status", JobStatus.DONE.value)  # as a router ends it
    assert http.post("/api/jobs", json=FORM, headers=bearer(key)).status_code == 201
    assert http.post("/api/jobs", json=FORM, headers=bearer(key)).status_code == 429
    assert queued(fake) == 3


def test_a_key_without_limits_and_the_admin_token_are_not_limited(make_app, fake):
    store = KeyStore(fake.r, fake.names)
    key = store.create("alice")[1]
    fake.all_workers()
    app = make_app(token="sesame-admin-token", jobs_per_minute=100_000)
    http = app.test_client()
    for who in (key, "sesame-admin-token"):
        assert [http.post("/api/jobs", json=FORM, headers=bearer(who)).status_code for _ in range(5)] == [
            201
        ] * 5
    assert http.get("/api/me", headers=bearer("sesame-admin-token")).get_json() == {
        "user": None,
        "scope": "admin",
        "key_id": None,
        "admin": True,
        "quota": None,
    }


def _post_all(urls: list[str], key: str, clients: int) -> list[tuple[int, str | None]]:
    """`clients` threads, released at once, each POSTing one job to urls[i % len(urls)]:
    [(status, Retry-After)]."""
    import json

    start, results = threading.Barrier(clients), [None] * clients
    body = json.dumps(FORM).encode()

    def post(i: int) -> None:
        req = urllib.request.Request(
            urls[i % len(urls)] + "/api/jobs",
            data=body,
            headers={**bearer(key), "Content-Type": "application/json"},
        )
        start.wait()
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                results[i] = (resp.status, None)
        except urllib.error.HTTPError as exc:
            results[i] = (exc.code, exc.headers.get("Retry-After"))

    threads = [threading.Thread(target=post, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


@pytest.mark.load
def test_limits_hold_under_200_concurrent_clients_over_two_ui_processes(production_ui, fake):
    """Two gunicorn UI processes on one prefix (as two replicas behind a proxy): 200 clients at once
    get exactly the key's burst of submits; 200 more on a key of 5 concurrent jobs get exactly 5."""
    store = KeyStore(fake.r, fake.names)
    rated = store.create("alice", "submit", rate_per_min=20)[1]
    capped = store.create("bob", "submit", max_jobs=5)[1]
    fake.all_workers()
    uis = [production_ui(DDM_UI_JOBS_PER_MINUTE="100000") for _ in range(2)]
    urls = [ui.url for ui in uis]

    began = time.monotonic()
    results = _post_all(urls, rated, 200)
    refill = (time.monotonic() - began) * 20 / 60  # tokens the bucket gained while they ran
    accepted = sum(status == 201 for status, _ in results)
    assert 20 <= accepted <= 20 + int(refill) + 1, (accepted, refill)
    refused = [(s, r) for s, r in results if s != 201]
    assert all(s == 429 and r is not None and int(r) >= 1 for s, r in refused), set(refused)
    assert queued(fake) == accepted

    results = _post_all(urls, capped, 200)
    assert sum(status == 201 for status, _ in results) == 5
    assert all(s == 429 for s, _ in results if s != 201)
    assert queued(fake) == accepted + 5
    print(
        f"200 clients over 2 UI processes: {accepted} of a 20/min key's submits and 5 of a 5-job key's taken"
    )


def test_a_whole_spec_over_http_may_not_name_a_webhook_or_a_noise(quota_app, fake):
    """POST /api/jobs {"spec": ...} (HttpClient) takes any JobSpec but these two: a webhook URL would make
    the router POST wherever a web user says, from its own network; an initial noise is stored only by
    the broker client. Refused with 400 naming the field, nothing queued."""
    from ddm.schema.messages import JobSpec

    app, make_key = quota_app
    http = app.test_client()
    key = make_key()
    for field, value in (("notify", "http://169.254.169.254/latest"), ("init_noise", "0" * 32)):
        spec = JobSpec.new([1], steps=2, **{field: value}).to_dict()
        refused = http.post("/api/jobs", json={"spec": spec}, headers=bearer(key))
        assert refused.status_code == 400 and field in refused.get_json()["error"], refused.get_json()
    assert queued(fake) == 0
    sent = JobSpec.new([3, 1, 3], steps=2)
    ok = http.post("/api/jobs", json={"spec": sent.to_dict()}, headers=bearer(key))
    assert ok.status_code == 201 and queued(fake) == 1
    got = ok.get_json()["spec"]
    assert got["job_id"] != sent.job_id and got["labels"] == [3, 1, 3]  # its own id, the labels as sent
