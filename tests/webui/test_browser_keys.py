"""Two users and an admin in a real browser (headless Chromium through Playwright), on a `ddm ui` process
with per-user API keys (issue 39 part 5): each signs in with their key in the page's field, sees "My
jobs" (only their own) and the counts of the others', and the key's quota left; the admin token sees
every job. The key stays in the tab's sessionStorage: never in a URL, never in localStorage.

Before: the field said "Access token" and kept it in localStorage (on disk, for every later visitor of
the browser profile); the page said nothing of who was signed in or of a key's quota, and called every
table "Recent jobs".
"""

from __future__ import annotations

import time

import pytest

from ddm.schema.jobs import owner_fields
from ddm.webui.keys import KeyStore
from tests.support.browser import keep_screenshot, open_connected, open_page, require_browser, take_screenshot

TOKEN = "sesame-admin-4e1d"


def _done_job(fake, owner: str, labels) -> str:
    spec = fake.start_job(labels=labels, steps=1)
    fake.frame(spec, 1)
    fake.finish(spec)
    fake.r.hset(fake.names.job(spec.job_id), mapping=owner_fields(owner))
    return spec.job_id


def _sign_in(browser, url: str, key: str, errors: list[str]):
    page = browser.new_page()  # a context of its own: its own storage, as another person's browser
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    open_connected(page, url, timeout_ms=15_000)
    page.fill("#token", key)
    page.dispatch_event("#token", "change")
    return page


def _rows(page, count: int, timeout_s: float = 15.0) -> set[str]:
    """The job ids of the table's rows once it has `count` of them (the page's CSP forbids the
    string-evaluated wait_for_function, so this polls)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = page.eval_on_selector_all(
            "#recent-body tr[data-job-id]", "rows => rows.map(r => r.dataset.jobId)"
        )
        if len(rows) == count or time.monotonic() > deadline:
            return set(rows)
        page.wait_for_timeout(200)


@pytest.mark.browser
def test_each_user_sees_only_their_jobs_and_the_admin_sees_all(ui_server, fake, fake_deployment, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    store = KeyStore(fake.r, fake.names)
    alice = store.create("alice", "submit", rate_per_min=20, max_jobs=3)[1]
    bob = store.create("bob", "submit")[1]
    fake.publish(fake_deployment)
    fake.all_workers()
    url = ui_server(DDM_UI_TOKEN=TOKEN, DDM_UI_JOBS_PER_MINUTE="1000")
    alices = _done_job(fake, "alice", (1, 2))
    bobs = _done_job(fake, "bob", (3,))
    errors: list[str] = []
    with sync_playwright() as p:
        browser, first = open_page(p, errors)
        first.close()
        pages = {who: _sign_in(browser, url, key, errors) for who, key in (("alice", alice), ("bob", bob))}
        pages["admin"] = _sign_in(browser, url, TOKEN, errors)

        page = pages["alice"]
        page.click("#submit")  # a job from the page, with alice's key: hers
        page.wait_for_url("**#job=*", timeout=10_000)
        submitted = page.url.split("#job=", 1)[1]
        assert fake.r.hget(fake.names.job(submitted), "owner") == b"alice"
        assert _rows(page, 2) == {alices, submitted}
        page.wait_for_selector("#who:has-text('1 of 3 jobs queued or running')", timeout=15_000)
        assert page.text_content("#recent-title") == "My jobs"
        who = page.text_content("#who")
        assert "Signed in as alice (submit)" in who and "of 20 jobs left this minute" in who, who
        page.wait_for_selector("#recent-others:has-text('1 done')", timeout=15_000)
        assert alice not in page.url
        assert page.evaluate("sessionStorage.getItem('ddm-ui-token')") == alice
        assert page.evaluate("localStorage.getItem('ddm-ui-token')") is None
        take_screenshot(page, tmp_path / "webui-keys.png")

        page = pages["bob"]
        assert _rows(page, 1) == {bobs}
        assert page.text_content("#recent-title") == "My jobs"
        assert "Signed in as bob (submit) · no quota" in page.text_content("#who")
        # alice's done job, and the one she just submitted: counts, no more
        page.wait_for_selector("#recent-others:has-text('1 queued')", timeout=15_000)
        assert "1 done" in page.text_content("#recent-others")

        page = pages["admin"]
        assert _rows(page, 3) == {alices, bobs, submitted}
        page.wait_for_selector("#recent-title:has-text('All jobs')", timeout=15_000)
        assert page.is_hidden("#recent-others")

        page.click("#sign-out")  # forgets the key: the table empties, nothing readable
        page.wait_for_selector("#who:has-text('Not signed in')", timeout=15_000)
        assert page.evaluate("sessionStorage.getItem('ddm-ui-token')") == ""
        browser.close()
    assert errors == []
    keep_screenshot(tmp_path / "webui-keys.png")
