"""End to end in a real browser: `ddm up` (expert workers, router and the web UI) on the real RabbitMQ
and Redis, driven by headless Chromium (Debian's `chromium` package) through Playwright.

Open the page, see both experts in the cluster panel, get a plain error for bad input, submit all ten
digits, watch the frames arrive, see the final images and the result PNG, reload and get the
trajectory replayed. Saves a screenshot under tmp (and in DDM_SCREENSHOT_DIR when set).
"""

from __future__ import annotations

import subprocess

import pytest

from ddm.ops.up.supervisor import stop_processes
from tests.support.browser import keep_screenshot, open_page, require_browser
from tests.support.harness import DDM_CLI, OutputWatcher, service_env
from tests.support.services import free_port

STEPS = 30


@pytest.mark.browser
def test_browser_submits_all_ten_and_watches_them_denoise(label_split_deployment, prefix, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    port = free_port()
    env = service_env(prefix, DDM_HEARTBEAT_S="0.5", DDM_HEARTBEAT_TTL_S="3")
    argv = [*DDM_CLI, "up", "--deployment", str(label_split_deployment)]
    argv += ["--buckets", "1,2,4,8", "--ui-port", str(port), "--grace", "10"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = OutputWatcher(proc)
    lines, wait_line = out.lines, out.wait_line

    url = f"http://127.0.0.1:{port}/"
    shot = tmp_path / "webui.png"
    errors: list[str] = []
    try:
        wait_line("ddm up: ready.")
        assert f"ddm up: web UI at {url}" in "".join(lines)
        with sync_playwright() as p:
            browser, page = open_page(p, errors, viewport={"width": 1440, "height": 960})
            page.goto(url)

            # the cluster panel: both experts, each with a live worker, frameworks shown
            page.wait_for_selector('.worker[data-expert="0"][data-alive="1"]', timeout=20_000)
            page.wait_for_selector('.worker[data-expert="1"][data-alive="1"]', timeout=20_000)
            panel = page.text_content("#experts-summary")
            assert "torch" in panel and "jax" in panel and "1 live worker" in panel

            # bad input is said plainly, next to the form
            page.click("#all-classes")
            page.fill("#steps", "0")
            page.click("#submit")
            page.wait_for_selector("#form-error:not([hidden])", timeout=10_000)
            assert "Bad input" in page.text_content("#form-error")
            assert "steps" in page.text_content("#form-error")

            # all ten digits, watched live
            page.fill("#steps", str(STEPS))
            page.fill("#seed", "7")
            page.click("#submit")
            page.wait_for_selector('#stage[data-done="1"]', timeout=180_000)
            assert page.is_hidden("#form-error")
            frames = int(page.get_attribute("#strip", "data-frames"))
            steps = int(page.get_attribute("#strip", "data-steps"))
            assert steps == STEPS and frames >= 0.8 * steps, (frames, steps)
            assert page.locator("#strip .cell.filled").count() == frames
            assert page.text_content("#job-status") == "done"

            # the final images: ten tiles with real pixels, a result thumbnail and a PNG to download
            assert page.locator(".tile-canvas").count() == 10
            painted = page.evaluate(
                """() => [...document.querySelectorAll('.tile-canvas')].every((c) => {
                    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                    const levels = new Set();
                    for (let i = 0; i < d.length; i += 4) levels.add(d[i]);
                    return levels.size > 8;
                })"""
            )
            assert painted, "a tile canvas shows no image"
            page.wait_for_function(
                """() => { const img = document.querySelector('#recent-body tr[data-status=done] img');
                           return img && img.complete && img.naturalWidth > 0; }""",
                timeout=15_000,
            )
            png = page.request.get(url.rstrip("/") + page.get_attribute("#download", "href"))
            assert png.status == 200 and png.headers["content-type"] == "image/png"
            assert png.body()[:8] == b"\x89PNG\r\n\x1a\n"
            page.wait_for_timeout(2500)  # one more cluster push, so the panel shows the batches
            page.screenshot(path=str(shot), full_page=True)

            # a reload replays the whole trajectory (the job id is in the URL)
            page.reload()
            page.wait_for_function(
                f"() => document.querySelector('#strip').dataset.frames === '{frames}'", timeout=20_000
            )
            page.wait_for_selector('#stage[data-done="1"]', timeout=10_000)
            browser.close()
        print(f"\nbrowser: {frames} frames seen of {steps} steps; screenshot {shot}")
        assert not errors, errors
    finally:
        keep_screenshot(shot, "webui.png")
        stop_processes([proc], grace_s=60)  # the prefix's queues and keys go with the fixture
