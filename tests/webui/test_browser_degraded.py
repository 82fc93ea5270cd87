"""A degraded job says so in a real browser (headless Chromium through Playwright, a `ddm ui` process
on a fake cluster): its status badge, a note under the job naming the expert and the steps, and its
row in Recent jobs. Issue 23: degraded is loud."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.schema.solver import SolverHistory
from tests.support.browser import chromium_page


@pytest.mark.browser
def test_a_degraded_result_is_marked_on_the_job_and_in_recent_jobs(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)
    fake.all_workers()
    spec = fake.start_job(labels=(1, 7), steps=3)
    for step in (1, 2, 3):
        frame = fake.frame(spec, step)
        x = np.zeros((spec.n, 1, 32, 32), np.float32)
        degraded = {1: list(range(2, step + 1))} if step > 1 else None
        fake.store.write_steps([(frame, x, 12.5, degraded, SolverHistory())])
    fake.finish(spec)
    url = ui_server()
    with chromium_page() as page:
        page.goto(f"{url}#job={spec.job_id}")
        page.wait_for_selector("#job-status.badge-degraded", timeout=15_000)
        assert page.text_content("#job-status") == "done · degraded"
        note = page.text_content("#job-degraded")
        assert "expert 1 left out at steps 2-3 (no live worker)" in note and "not the full model" in note
        row = page.locator(f"#recent-body tr[data-job-id='{spec.job_id}']")
        row.wait_for(timeout=15_000)
        assert row.locator(".badge-degraded").text_content() == "degraded"
        page.select_option("#strategy", "topk:2")  # the menu's words come from /api/config
        hint = page.text_content("#strategy-hint")
        assert hint == "the router's 2 most likely experts, weights renormalised"
