"""Issue 40 items 7 and 6 in a real browser (headless Chromium, a `ddm ui` process on a fake cluster): a
60-image job that finishes while the page watches it gets its thumbnail in Recent jobs without a
reload or a scroll, at a laptop's 1280 px, where the job's tiles push the table below the fold (the
thumbnail was lazy: it loaded only once scrolled to); the job view says the job's priority."""

from __future__ import annotations

import time

import pytest

from tests.support.browser import chromium_page, open_connected

LOADED = "img => img.complete && img.naturalWidth > 0"


@pytest.mark.browser
def test_a_finished_60_image_jobs_thumbnail_shows_without_a_reload(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)
    fake.all_workers()
    url = ui_server()
    with chromium_page(viewport={"width": 1280, "height": 800}) as page:
        spec = fake.start_job(labels=list(range(10)) * 6, steps=3)  # 60 images
        fake.r.hset(fake.names.job(spec.job_id), "priority", "7")  # as Client.submit(priority=7)
        open_connected(page, f"{url}#job={spec.job_id}")
        fake.frame(spec, 1)
        page.wait_for_selector("#tiles figure:nth-child(60) canvas", state="attached", timeout=15_000)
        row = f"#recent-body tr[data-job-id='{spec.job_id}']"
        page.wait_for_selector(row, state="attached", timeout=15_000)
        for step in range(2, 4):
            fake.frame(spec, step)
            time.sleep(0.2)
        fake.finish(spec)
        page.wait_for_selector("#stage[data-done='1']", timeout=15_000)
        assert "priority 7" in page.text_content("#job-sub")
        page.wait_for_selector(f"{row}[data-status='done'] td.thumb img", state="attached", timeout=15_000)
        img = page.locator(f"{row} td.thumb img")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not img.evaluate(LOADED):
            time.sleep(0.2)
        state = img.evaluate("i => [i.complete, i.naturalWidth, i.getAttribute('src'), i.loading]")
        assert img.evaluate(LOADED), f"thumbnail not loaded: {state}"
