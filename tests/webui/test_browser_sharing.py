"""The shared UI in a real browser (headless Chromium through Playwright): a `ddm ui` process on a fake
cluster with DDM_UI_TOKEN set and a deployment whose classes are not digits. The page names the
deployment's classes, asks for the token, refuses a wrong one plainly, keeps the right one in
localStorage and submits with it."""

from __future__ import annotations

import pytest

from tests.support.browser import open_connected, open_page, require_browser

TOKEN = "sesame-7f3a9c"
FASHION = ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot")


@pytest.mark.browser
def test_the_page_names_the_classes_and_submits_with_a_token(ui_server, fake, fake_deployment):
    require_browser()
    from playwright.sync_api import sync_playwright

    fake.publish(fake_deployment, class_names=FASHION, sample_space=None)  # the legacy space, renamed
    fake.all_workers()
    url = ui_server(DDM_UI_TOKEN=TOKEN)
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_page(p, errors)
        open_connected(page, url, timeout_ms=10_000)
        assert page.locator("#classes .chip span").all_text_contents() == list(FASHION)
        assert page.text_content("#all-classes") == "All 10"
        assert "digit" not in page.text_content("body").lower()

        page.fill("#token", "wrong-token")
        page.click("#submit")
        page.wait_for_selector("#form-error:not([hidden])", timeout=10_000)
        assert "Token needed" in page.text_content("#form-error")

        page.fill("#token", TOKEN)
        page.click("#submit")
        page.wait_for_url("**#job=*", timeout=10_000)
        job_id = page.url.split("#job=", 1)[1]
        assert fake.r.exists(fake.names.job(job_id))  # queued on the test prefix

        done = fake.start_job(labels=(1, 2), steps=1)
        fake.frame(done, 1)
        fake.finish(done)
        page.reload()
        assert page.input_value("#token") == TOKEN  # kept in this browser
        # every read needs the token: the page sends it (the socket's auth: the overview's recent jobs;
        # the result thumbnail fetched with the header, shown as a blob URL)
        page.wait_for_selector(f'tr[data-job-id="{job_id}"]', timeout=10_000)
        thumb = f'tr[data-job-id="{done.job_id}"] td.thumb img[src^="blob:"]'
        page.wait_for_selector(thumb, timeout=10_000)
        assert page.evaluate(f"document.querySelector('{thumb}').naturalWidth") > 0
        browser.close()
    assert errors == []
