"""Per-user API keys and job isolation (issue 39 parts 2 and 3), on the real Redis and RabbitMQ: `ddm keys`
creates, lists and revokes keys that Redis keeps only as salted hashes; once a key exists nothing the UI
shows is readable without one; wrong, truncated, other users' and revoked keys get nothing; a key's user
reads, watches, fetches and cancels only their own jobs; admins (an admin key, DDM_UI_TOKEN) see and
cancel all.

Before: the UI had one shared token and no users; `ddm keys` did not exist; job status and results were
open to any holder of the token, whoever submitted the job.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from ddm.schema.jobs import owner_fields
from ddm.webui.keys import KeyStore
from tests.support.harness import DDM_CLI, service_env
from tests.support.socketio import wait_for

TOKEN = "sesame-7f3a9c-token"
FORM = {"labels": [1, 2], "n_per_label": 1, "steps": 4, "strategy": "oracle", "guidance": 1.0, "seed": 3}


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def ddm_keys(prefix: str, *args: str) -> subprocess.CompletedProcess:
    argv = [*DDM_CLI, "keys", *args]
    return subprocess.run(argv, env=service_env(prefix), capture_output=True, text=True, timeout=60)


@pytest.fixture
def keyed(make_app, fake):
    """(app, {name: key}, store): keys for alice and bob (submit), carol (read) and root (admin), a
    revoked one of alice's, the workers beating, and no budget of wrong keys in the way."""
    store = KeyStore(fake.r, fake.names)
    keys = {name: store.create(user, scope)[1] for name, user, scope in KEYS}
    store.revoke(keys["revoked"].partition(".")[0])
    fake.all_workers()
    app = make_app(token=TOKEN, jobs_per_minute=100_000)
    return app, keys, store


KEYS = [
    ("alice", "alice", "submit"),
    ("bob", "bob", "submit"),
    ("carol", "carol", "read"),
    ("root", "root", "admin"),
    ("revoked", "alice", "submit"),
]


def owned_done_job(fake, owner: str | None):
    """A finished job with its result, owned by `owner` as the UI records it."""
    spec = fake.start_job(labels=(1, 2), steps=2)
    for step in (1, 2):
        fake.frame(spec, step)
    fake.finish(spec)
    if owner is not None:
        fake.r.hset(fake.names.job(spec.job_id), mapping=owner_fields(owner))
    return spec.job_id


def reads(job_id: str) -> list[str]:
    return [
        f"/api/jobs/{job_id}",
        f"/api/jobs/{job_id}/result.png",
        f"/api/jobs/{job_id}/result.pixels",
        f"/v1/images/{job_id}/0.png",
    ]


def test_ddm_keys_create_list_revoke_and_only_hashes_stored(fake):
    made = ddm_keys(fake.prefix, "create", "--user", "alice", "--rate", "60/min", "--max-jobs", "3")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[0]
    key_id, _, secret = key.partition(".")
    assert len(key_id) == 16 and len(secret) == 43
    listed = ddm_keys(fake.prefix, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (record,) = json.loads(listed.stdout)
    assert record["key_id"] == key_id and record["user"] == "alice" and record["scope"] == "submit"
    assert (record["rate_per_min"], record["max_jobs"], record["revoked_at"]) == (60, 3, None)
    assert secret not in listed.stdout and "digest" not in record and "salt" not in record
    # nothing under the prefix holds the secret, nor its unsalted hash
    import hashlib

    plain = hashlib.sha256(secret.encode()).hexdigest()
    for name in fake.r.scan_iter(match=f"{fake.prefix}*"):
        kind = fake.r.type(name)
        values = fake.r.hvals(name) if kind == b"hash" else fake.r.smembers(name) if kind == b"set" else []
        for value in values:
            assert secret.encode() not in value and plain.encode() not in value, (name, value)
    assert KeyStore(fake.r, fake.names).verify(key).user == "alice"
    revoked = ddm_keys(fake.prefix, "revoke", key_id)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout, revoked.stderr
    assert "revoked" in ddm_keys(fake.prefix, "list").stdout
    assert KeyStore(fake.r, fake.names).verify(key) is None
    assert ddm_keys(fake.prefix, "revoke", "00000000").returncode != 0
    assert ddm_keys(fake.prefix, "create", "--user", "bad name").returncode != 0


def test_with_keys_on_nothing_is_readable_without_one(make_app, fake):
    KeyStore(fake.r, fake.names).create("alice")
    job = owned_done_job(fake, "alice")
    http = make_app().test_client()  # no DDM_UI_TOKEN: the keys alone turn auth on
    assert http.get("/api/config").get_json()["token_required"] is True
    assert http.get("/healthz").status_code == 200
    for path in [*reads(job), "/api/jobs", "/api/cluster", "/v1/models"]:
        resp = http.get(path)
        assert resp.status_code == 401, (path, resp.status_code)
    assert http.post("/api/jobs", json=FORM).status_code == 401
    assert http.post(f"/api/jobs/{job}/cancel").status_code == 401


def test_wrong_truncated_other_and_revoked_keys_get_nothing(keyed, fake):
    app, keys, _ = keyed
    http = app.test_client()
    job = owned_done_job(fake, "alice")
    for path in reads(job):
        assert http.get(path, headers=bearer(keys["alice"])).status_code == 200, path
    alice, bob = keys["alice"], keys["bob"]
    a_id, _, a_secret = alice.partition(".")
    b_id, _, b_secret = bob.partition(".")
    tried = {
        keys["revoked"],
        f"{a_id}.{b_secret}",  # alice's id, bob's secret
        f"{b_id}.{a_secret}",
        alice + "x",
        alice.upper(),
        a_id,
        a_id + ".",
        "." + a_secret,
        TOKEN[:-1],
        TOKEN + "x",
    }
    tried |= {alice[:n] for n in range(1, len(alice))}  # every truncation
    tried |= {alice[:i] + ("A" if alice[i] != "A" else "B") + alice[i + 1 :] for i in range(len(alice))}
    import secrets

    while len(tried) < 3334:  # random keys, well formed and not: 10,002 requests in all
        tried.add(f"{secrets.token_hex(8)}.{secrets.token_urlsafe(32)}")
        tried.add(f"{a_id}.{secrets.token_urlsafe(32)}")
    start, n = time.monotonic(), 0
    for key in sorted(tried):
        for path in (reads(job)[0], reads(job)[1], "/api/jobs"):
            resp = http.get(path, headers=bearer(key))
            n += 1
            assert resp.status_code == 401 and resp.get_json()["kind"] == "unauthorized", (key, path)
    # bob's and carol's keys are right, for other users: the job is not theirs (404, as no job)
    for key in (bob, keys["carol"]):
        for path in reads(job):
            assert http.get(path, headers=bearer(key)).status_code == 404, path
    print(f"{n} requests with {len(tried)} wrong keys refused in {time.monotonic() - start:.1f} s")


def test_a_user_reads_and_cancels_only_their_own_jobs(keyed, fake):
    app, keys, _ = keyed
    http = app.test_client()
    mine = http.post("/api/jobs", json=FORM, headers=bearer(keys["alice"]))
    assert mine.status_code == 201, mine.get_json()
    alice_job = mine.get_json()["job_id"]
    assert fake.r.hget(fake.names.job(alice_job), "owner") == b"alice"
    bob_job = http.post("/api/jobs", json=FORM, headers=bearer(keys["bob"])).get_json()["job_id"]
    token_job = http.post("/api/jobs", json=FORM, headers=bearer(TOKEN)).get_json()["job_id"]
    assert fake.r.hget(fake.names.job(token_job), "owner") is None  # the token has no user

    listed = http.get("/api/jobs", headers=bearer(keys["alice"])).get_json()
    assert [j["job_id"] for j in listed["jobs"]] == [alice_job]
    assert listed["others"] == {"queued": 2}  # counts only: no id, no prompt
    assert bob_job not in json.dumps(listed) and token_job not in json.dumps(listed)
    carol = http.get("/api/jobs", headers=bearer(keys["carol"])).get_json()
    assert carol["jobs"] == [] and carol["others"] == {"queued": 3}

    # another's job: 404 with the words of no job, on read and cancel; nothing written
    for key, job in ((keys["bob"], alice_job), (keys["alice"], bob_job), (keys["alice"], token_job)):
        read = http.get(f"/api/jobs/{job}", headers=bearer(key))
        cancel = http.post(f"/api/jobs/{job}/cancel", headers=bearer(key))
        assert read.status_code == cancel.status_code == 404
        assert (
            read.get_json()["error"].replace(job, "nosuchjob")
            == http.get("/api/jobs/nosuchjob", headers=bearer(key)).get_json()["error"]
        )
        assert fake.r.hget(fake.names.job(job), "cancel_requested_at") is None
    # a read key submits and cancels nothing, even its user's
    assert http.post("/api/jobs", json=FORM, headers=bearer(keys["carol"])).status_code == 403
    assert http.post(f"/api/jobs/{alice_job}/cancel", headers=bearer(keys["carol"])).status_code == 403
    gen = http.post("/v1/images/generations", json={"prompt": "1"}, headers=bearer(keys["carol"]))
    assert gen.status_code == 403 and gen.get_json()["error"]["code"] == "forbidden"
    # the owner cancels their own
    assert http.post(f"/api/jobs/{alice_job}/cancel", headers=bearer(keys["alice"])).status_code == 200

    # admins: the admin key and DDM_UI_TOKEN see every job and cancel anyone's
    for admin in (keys["root"], TOKEN):
        everything = http.get("/api/jobs", headers=bearer(admin)).get_json()
        assert {alice_job, bob_job, token_job} <= {j["job_id"] for j in everything["jobs"]}
        assert "others" not in everything
        assert http.get(f"/api/jobs/{bob_job}", headers=bearer(admin)).status_code == 200
    assert http.post(f"/api/jobs/{bob_job}/cancel", headers=bearer(keys["root"])).status_code == 200
    assert http.post(f"/api/jobs/{token_job}/cancel", headers=bearer(TOKEN)).status_code == 200
    assert fake.r.hget(fake.names.job(bob_job), "cancel_requested_at") is not None


def test_results_and_image_urls_answer_only_their_owner_and_admins(keyed, fake):
    app, keys, _ = keyed
    http = app.test_client()
    job = owned_done_job(fake, "bob")
    legacy = owned_done_job(fake, None)  # from before keys, or the CLI: the admins'
    for path in reads(job):
        assert http.get(path, headers=bearer(keys["bob"])).status_code == 200, path
        assert http.get(path, headers=bearer(keys["alice"])).status_code == 404, path
        assert http.get(path, headers=bearer(keys["root"])).status_code == 200, path
        assert http.get(path, headers=bearer(TOKEN)).status_code == 200, path
    for path in reads(legacy):
        assert http.get(path, headers=bearer(keys["bob"])).status_code == 404, path
        assert http.get(path, headers=bearer(TOKEN)).status_code == 200, path


def test_socket_watch_and_overview_are_per_user(keyed, fake):
    app, keys, _ = keyed
    socketio = app.extensions["socketio"]
    alice_job, bob_job = owned_done_job(fake, "alice"), owned_done_job(fake, "bob")

    def connect(key):
        return socketio.test_client(
            app, auth={"token": key} if key else None, flask_test_client=app.test_client()
        )

    def overview(client):
        got = wait_for(client, lambda g: any(e["name"] == "overview" for e in g))
        return next(e for e in got if e["name"] == "overview")["args"][0]

    bob = connect(keys["bob"])
    seen = overview(bob)
    assert [j["job_id"] for j in seen["jobs"]] == [bob_job] and seen["others"] == {"done": 1}
    refused = bob.emit("watch", {"job_id": alice_job}, callback=True)
    assert refused["ok"] is False and refused["kind"] == "not_found"
    assert bob.emit("watch", {"job_id": "nosuchjob"}, callback=True)["error"] == refused["error"].replace(
        alice_job, "nosuchjob"
    )
    assert bob.emit("watch", {"job_id": bob_job}, callback=True)["ok"]
    # a key in the request is who watches, whatever the socket connected as
    assert bob.emit("watch", {"job_id": alice_job, "token": keys["alice"]}, callback=True)["ok"]
    bob.disconnect()

    root = connect(keys["root"])
    assert {alice_job, bob_job} <= {j["job_id"] for j in overview(root)["jobs"]}
    assert root.emit("watch", {"job_id": alice_job}, callback=True)["ok"]
    root.disconnect()

    for key in (None, keys["revoked"], keys["bob"][:-1]):
        anon = connect(key)
        if anon.is_connected():  # no key: connected, reads nothing
            assert not any(e["name"] == "overview" for e in anon.get_received())
            ack = anon.emit("watch", {"job_id": alice_job}, callback=True)
            assert ack["ok"] is False and ack["kind"] == "unauthorized"
            anon.disconnect()
        else:
            assert key is not None  # a wrong key is refused at connect


def test_the_key_names_are_pinned():
    from ddm.schema import Names

    assert Names("p:").api_key("0123abcd0123abcd") == "p:ddm:apikey:0123abcd0123abcd"
    assert Names().api_keys == "ddm:apikeys"
    with pytest.raises(Exception, match="API key id"):
        Names().api_key("not-hex")


def test_a_revoked_key_and_an_open_socket_lose_their_sockets(make_app, fake):
    """Revoking is at once for requests, and within an overview interval for sockets that connected with
    the key; a socket that connected while the server was open loses its rights once keys are on."""
    store = KeyStore(fake.r, fake.names)
    app = make_app(overview_interval_s=0.2)
    socketio = app.extensions["socketio"]
    job = owned_done_job(fake, "alice")
    opened = socketio.test_client(app, flask_test_client=app.test_client())  # no keys yet: open
    assert opened.is_connected()
    _, key = store.create("alice")
    ack = opened.emit("watch", {"job_id": job}, callback=True)
    assert ack["ok"] is False and ack["kind"] == "unauthorized"
    alice = socketio.test_client(app, auth={"token": key}, flask_test_client=app.test_client())
    assert alice.is_connected() and alice.emit("watch", {"job_id": job}, callback=True)["ok"]
    store.revoke(key.partition(".")[0])
    deadline = time.monotonic() + 10
    while (alice.is_connected() or opened.is_connected()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alice.is_connected() and not opened.is_connected()
    assert app.test_client().get(f"/api/jobs/{job}", headers=bearer(key)).status_code == 401


def test_keys_on_the_production_server_with_the_openai_package(production_ui, fake):
    """The production command (gunicorn, gevent): the openai package's client with a key, real websockets."""
    import urllib.error
    import urllib.request

    import openai
    import socketio

    store = KeyStore(fake.r, fake.names)
    alice, bob = store.create("alice")[1], store.create("bob", "read")[1]
    ui = production_ui()  # no DDM_UI_TOKEN: the keys alone
    job = owned_done_job(fake, "alice")

    def get(path, key):
        request = urllib.request.Request(ui.url + path, headers=bearer(key))
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert [get(p, alice) for p in reads(job)] == [200] * 4
    assert [get(p, bob) for p in reads(job)] == [404] * 4
    assert [get(p, None) for p in reads(job)] == [401] * 4
    client = openai.OpenAI(base_url=ui.url + "/v1", api_key=bob, max_retries=0)
    assert [m.id for m in client.models.list()]  # a read key lists models
    with pytest.raises(openai.PermissionDeniedError):
        client.images.generate(model=client.models.list().data[0].id, prompt="1")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=ui.url + "/v1", api_key=alice[:-1], max_retries=0).models.list()

    got = []
    sock = socketio.Client(reconnection=False)
    sock.on("overview", lambda data: got.append(data))
    sock.connect(ui.url, auth={"token": bob}, transports=["websocket"], wait_timeout=10)
    try:
        assert sock.call("watch", {"job_id": job}, timeout=10)["kind"] == "not_found"
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            sock.sleep(0.1)
        assert got and got[0]["jobs"] == [] and got[0]["others"] == {"done": 1}
        assert sock.call("watch", {"job_id": job, "token": alice}, timeout=10)["ok"]
    finally:
        sock.disconnect()
