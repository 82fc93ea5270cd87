"""One client must not run the UI out of memory by watching: 300 watch requests for one finished
64-image, 40-step job (3.5 MB of frames per replay), sent from one socket that never reads, against the
production server (gunicorn). The UI process's resident memory (VmRSS of the serving process, sampled
every 50 ms) may grow by at most MAX_GROWTH_MB, and the UI keeps nothing of the socket once it closes.

Before the bounds it grew from 71 MB to 711 MB in 8 s here: every watch replayed the whole job into the
socket's unbounded send queue. Now the socket's watch budget (DDM_UI_WATCHES_PER_MINUTE) refuses most of
them, and what is sent waits for the socket to take it (DDM_UI_VIEWER_BACKLOG_KB, 2 MiB).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.wire import Drain, WireSocket

MAX_GROWTH_MB = 40  # measured: 2-4 MB with the default budget, 6.5 MB with all admitted (docs/WEBUI.md)
WATCHES = 300
SAMPLE_S = 8.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def health(url: str) -> dict:
    with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
        return json.loads(resp.read())


def big_finished_job(fake):
    spec = fake.start_job(labels=[i % 10 for i in range(64)], steps=40)
    for step in range(1, 41):
        fake.frame(spec, step)
    fake.finish(spec)
    return spec


@pytest.mark.load
@pytest.mark.parametrize(
    "per_minute",
    [None, str(WATCHES)],  # the default budget; every watch admitted: the backlog bound alone holds
    ids=["default", "all-admitted"],
)
def test_a_silent_socket_watching_300_times_keeps_the_ui_small(production_ui, fake, per_minute):
    ui = production_ui(**({"DDM_UI_WATCHES_PER_MINUTE": per_minute} if per_minute else {}))
    spec = big_finished_job(fake)

    warm = WireSocket(ui.url)  # one real viewer first: every code path loaded before the baseline
    drain = Drain([warm])
    warm.emit("watch", {"job_id": spec.job_id}, ack=1)
    deadline = time.monotonic() + 20
    while warm.steps.get(spec.job_id, []) != list(range(1, 41)) or warm.statuses[-1:] != ["done"]:
        assert time.monotonic() < deadline, (warm.steps, warm.statuses)
        time.sleep(0.05)
    warm.close()
    drain.stop()
    time.sleep(0.5)
    base = rss_mb(ui.pid)

    silent = WireSocket(ui.url, rcvbuf=4096)
    for i in range(WATCHES):
        silent.emit("watch", {"job_id": spec.job_id}, ack=i)
    peak, t0 = base, time.monotonic()
    while time.monotonic() - t0 < SAMPLE_S:
        peak = max(peak, rss_mb(ui.pid))
        time.sleep(0.05)
    assert health(ui.url)["viewers"] == 1  # still watching (one job, one viewer): it was not simply cut off
    silent.close()

    deadline = time.monotonic() + 10
    while (h := health(ui.url))["viewers"] or h["tailers"] or h["clients"]:
        assert time.monotonic() < deadline, f"the UI kept the closed socket's state: {h}"
        time.sleep(0.1)
    after = rss_mb(ui.pid)
    report = (
        f"\nwatch memory: {WATCHES} watches of a 64-image x 40-step job from a socket that never reads: "
        f"UI RSS {base:.0f} MB -> peak {peak:.0f} MB (+{peak - base:.1f} MB) in {SAMPLE_S:.0f} s; "
        f"{after:.0f} MB after it closed\n"
    )
    sys.__stdout__.write(report)
    assert peak - base < MAX_GROWTH_MB, report
