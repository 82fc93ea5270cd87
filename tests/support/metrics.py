"""Reading a worker's Prometheus /metrics and /healthz over HTTP (ddm/runtime/metrics.py serves them)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from a worker's /metrics."""
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples, name: str, **labels) -> float:
    return samples[(name, tuple(sorted((k, str(v)) for k, v in labels.items())))]


def wait_healthy(port: int, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = get(f"http://127.0.0.1:{port}/healthz")
        except OSError:  # not listening yet
            status, body = None, ""
        if status == 200:
            return json.loads(body)
        if time.monotonic() > deadline:
            raise AssertionError(f"/healthz on {port} answered {status} {body!r} for {timeout} s")
        time.sleep(0.1)
