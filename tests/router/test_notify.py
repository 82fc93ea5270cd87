"""Completion webhooks (issue 40 item 8) against a real local HTTP server and the real Redis: a job that
names `notify` gets one POST when it ends (done, failed or cancelled, a queued job a client cancelled
included), retried on a refused connection or a 5xx, given up after its attempts, each bounded by a
timeout; the router's thread only puts the job id on a bounded queue, so a slow or dead receiver never
holds up its step loop."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ddm.client import Client
from ddm.router.intake import Delivery, Settle
from ddm.router.notify import Notifier
from ddm.router.worker import RouterWorker
from ddm.schema import jobs
from ddm.schema.errors import SchemaError
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob


class Receiver:
    """A local HTTP server that records every POST; `answers` are the status codes it gives in turn
    (then 200); `delay_s` holds each answer that long."""

    def __init__(self, answers=(), delay_s: float = 0.0):
        self.posts: list[dict] = []
        self.answers = list(answers)
        self.delay_s = delay_s
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append({"body": json.loads(body), "type": self.headers["Content-Type"]})
                time.sleep(receiver.delay_s)
                code = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver.got.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_posts(self, n: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.posts) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.posts

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _queued(client: Client, url: str, labels=(3,)) -> JobSpec:
    spec = JobSpec.new(list(labels), steps=2, strategy="oracle", guidance=1.0, notify=url)
    client.submit(spec, check=False)
    return spec


def test_notify_must_be_an_http_url():
    for bad in ("ftp://x/y", "localhost:8080/hook", "http://", "http://a b/", "x" * 3000, 7):
        with pytest.raises(SchemaError, match="notify"):
            JobSpec.new([3], notify=bad)
    spec = JobSpec.new([3], notify="https://example.org/done?job=1")
    assert JobSpec.decode(spec.encode()) == spec and "notify" not in JobSpec.new([3]).to_dict()


def test_a_finished_job_is_posted_once_by_the_router(settings, label_split_deployment, receiver):
    router = RouterWorker(settings, label_split_deployment)  # intake and store: nothing consumes
    with Client(settings=settings) as client:
        spec = _queued(client, receiver.url, labels=(3, 4))
        assert router.store.acquire(spec.job_id)
        router.store.start(spec.job_id, router.worker_id, 0, ResolvedJob.of(spec))
        t0 = time.perf_counter()
        assert router.store.finish(spec.job_id, np.zeros((2, 1, 32, 32), np.float32))
        assert time.perf_counter() - t0 < 0.5  # the POST happens on the notifier's thread
        [post] = receiver.wait_posts(1)
        time.sleep(0.3)
    assert len(receiver.posts) == 1 and post["type"] == "application/json"
    body = post["body"]
    assert (body["job_id"], body["status"], body["error"], body["n"], body["steps"]) == (
        spec.job_id,
        "done",
        None,
        2,
        2,
    )
    router.notifier.close()


def test_a_queued_job_a_client_cancelled_is_posted_when_a_router_settles_it(
    settings, label_split_deployment, receiver
):
    router = RouterWorker(settings, label_split_deployment)
    with Client(settings=settings) as client:
        spec = _queued(client, receiver.url)
        client.cancel(spec.job_id)  # no router has it: ended at once, by the client
        decision = router.intake.decide(Delivery(1, spec, None, spec.encode()))
    assert isinstance(decision, Settle)
    [post] = receiver.wait_posts(1)
    assert post["body"]["status"] == "cancelled"
    router.notifier.close()


def test_retries_a_5xx_then_gives_up_and_never_blocks(settings):
    flaky = Receiver(answers=(500, 503))
    slow = Receiver(delay_s=3.0)
    try:
        with Client(settings=settings) as client:
            notifier = Notifier(
                client.redis, client.names, timeout_s=0.5, attempts=3, backoff_s=0.05, capacity=2
            )
            ok = _queued(client, flaky.url)
            client.redis.hset(client.names.job(ok.job_id), mapping=jobs.failed_fields("boom", time.time()))
            notifier.ended(ok.job_id)
            posts = flaky.wait_posts(3)
            assert [p["body"]["status"] for p in posts] == ["failed"] * 3  # 500, 503, then 200
            assert posts[0]["body"]["error"] == "boom"

            stuck = [_queued(client, slow.url) for _ in range(6)]
            t0 = time.perf_counter()
            for spec in stuck:  # capacity 2: the rest are dropped (said in the log), never waited for
                notifier.ended(spec.job_id)
            assert time.perf_counter() - t0 < 0.2
            assert notifier.dropped >= 3
            notifier.close(timeout=10)
            # each attempt at the slow one timed out at 0.5 s: 3 attempts per job, then given up
            assert notifier.given_up >= 1 and all(p["body"]["job_id"] for p in slow.posts)
    finally:
        flaky.close()
        slow.close()
