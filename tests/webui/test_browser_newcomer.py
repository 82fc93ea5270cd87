"""Issue 28, the newcomer's edges in the web UI, in a real browser (headless Chromium through Playwright,
a `ddm ui` process on a fake cluster) and over the routes:

- item 4: on a deployment whose default is the oracle (and whose router reads x_t), choosing
  unconditional images shows and submits what the CLI does (top1: the strategy is sent unset and the
  router resolves it), never the refused oracle; an explicit oracle keeps the short hint and is refused;
- item 9: many tiles use the stage; an unconditional job's result PNG (the Recent jobs thumbnail) is a
  grid, not a one-column sliver; the pill says when no router serves; under oracle/top1 the weights
  chart says it is one flat block and points to full or topk:2.
"""

from __future__ import annotations

import io
import json
import urllib.request

import numpy as np
import pytest
from PIL import Image

from ddm.schema.flow import NULL_CLASS
from ddm.schema.messages import Frame, JobSpec
from ddm.schema.resolved import ResolvedJob
from tests.support.browser import chromium_page, open_connected


def _run_job(fake, labels, steps=3, weights=None, strategy="oracle"):
    """A finished job of `labels` written as the router writes it; weights [K] for every image (None:
    the fake's one-hot oracle weights)."""
    spec = JobSpec.new(list(labels), steps=steps, strategy=strategy, guidance=1.0)
    fake.store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec))
    for step in range(1, steps + 1):
        if weights is None:
            fake.frame(spec, step)
            continue
        x = np.zeros((spec.n, 1, 32, 32), np.float32)
        w = np.tile(np.asarray(weights, np.float32), (spec.n, 1))
        frame = Frame.from_latent(spec.job_id, step, step / steps, x, [0, 1], w, 12.5)
        fake.store.write_step(frame, x, 12.5)
    fake.finish(spec)
    return spec


@pytest.mark.browser
def test_unconditional_on_an_oracle_default_runs_what_the_cli_runs(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment, router_kind="learned")  # as MNIST: a learned router, default oracle
    fake.all_workers()
    url = ui_server()
    with chromium_page() as page:
        open_connected(page, url)
        page.wait_for_selector("#strategy option[value='top1']", state="attached", timeout=10_000)
        assert page.input_value("#strategy") == "oracle"  # labelled images: the default
        page.check("#unconditional")
        # the page shows what the server will run, never the oracle it would refuse
        assert page.input_value("#strategy") == "top1"
        hint = page.locator("#strategy-hint")
        assert "bad" not in (hint.get_attribute("class") or "")
        assert "unconditional images get top1" in hint.text_content()
        page.click("#submit")
        page.wait_for_selector("#stage[data-job-id]", state="attached", timeout=15_000)
        assert page.locator("#form-error").is_hidden(), page.text_content("#form-error")
        job_id = page.get_attribute("#stage", "data-job-id")
        with urllib.request.urlopen(f"{url}/api/jobs/{job_id}", timeout=10) as resp:
            job = json.load(resp)
        assert job["labels"] == [7, None] and job["strategy"] is None  # null: unconditional; unset: top1

        # unticked again: back to the default
        page.uncheck("#unconditional")
        assert page.input_value("#strategy") == "oracle"

        # an explicit oracle with unconditional images: the short hint, and refused
        page.check("#unconditional")
        page.select_option("#strategy", "oracle")
        assert "oracle routes by the label" in hint.text_content()
        assert "bad" in hint.get_attribute("class")
        page.click("#submit")
        page.wait_for_selector("#form-error:not([hidden])", timeout=10_000)
        assert "Bad input" in page.text_content("#form-error")
        # an explicit choice stays when the labels change
        page.uncheck("#unconditional")
        page.check("#unconditional")
        assert page.input_value("#strategy") == "oracle"


@pytest.mark.browser
def test_the_pill_says_when_no_router_serves(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)  # a descriptor, but no router heartbeat
    fake.beat("w-e0", expert_id=0)
    url = ui_server()
    with chromium_page() as page:
        page.goto(url)
        # "connecting…" wears the same amber class until the first overview: wait for the words
        page.locator("#conn", has_text="no router serving").wait_for(timeout=15_000)
        assert "pill-wait" in page.get_attribute("#conn", "class")
        assert "no router has a live heartbeat" in page.get_attribute("#conn", "title")
        fake.all_workers()  # the router beats: live
        page.wait_for_selector("#conn.pill-ok", timeout=15_000)
        assert page.text_content("#conn") == "live"


@pytest.mark.browser
def test_with_no_deployment_published_generate_is_off_and_no_digits_are_offered(
    ui_server, fake, fake_deployment
):
    """`ddm ui` alone showed digit chips with Generate enabled (issue 40 part 7); once a router publishes
    its descriptor, its classes and Generate appear without a reload."""
    url = ui_server()
    with chromium_page() as page:
        page.goto(url)
        assert page.locator("#classes input").count() == 0
        assert page.is_disabled("#submit") and "no router" in page.get_attribute("#submit", "title")
        fake.publish(fake_deployment)
        fake.all_workers()
        page.wait_for_selector("#submit:not([disabled])", timeout=20_000)
        assert page.locator("#classes input").count() == 10


@pytest.mark.browser
def test_many_tiles_use_the_stage_and_flat_weights_point_to_full(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)
    fake.all_workers()
    many = _run_job(fake, [3, 7] * 10)  # 20 images, 10 per label; oracle: one expert each
    alone = _run_job(fake, [NULL_CLASS] * 20, strategy="full", weights=[0.6, 0.4])
    url = ui_server()
    with chromium_page(viewport={"width": 1440, "height": 960}) as page:
        page.goto(f"{url}#job={many.job_id}")
        page.wait_for_selector("#stage[data-done='1']", timeout=15_000)
        page.wait_for_selector("#tiles figure:nth-child(20) canvas", state="attached", timeout=10_000)
        widths = page.locator("#tiles canvas").evaluate_all("cs => cs.map(c => c.width)")
        assert min(widths) >= 3 * 32, widths  # was 32 px: 10 rows of 2 in a 480 px box
        columns = page.locator("#tiles").evaluate("t => getComputedStyle(t).gridTemplateColumns")
        assert len(columns.split()) % 2 == 0  # still one column per label, repeated
        captions = page.locator(".tile-cap").all_text_contents()
        assert captions[: len(columns.split())] == ["3", "7"] * (len(columns.split()) // 2)
        note = page.locator("#weights-flat")
        note.wait_for(state="visible", timeout=10_000)
        assert "one flat block" in note.text_content() and "Choose full or topk:2" in note.text_content()

        page.goto(f"{url}#job={alone.job_id}")
        page.reload()
        page.wait_for_selector("#stage[data-done='1']", timeout=15_000)
        page.wait_for_selector("#tiles figure:nth-child(20) canvas", state="attached", timeout=10_000)
        widths = page.locator("#tiles canvas").evaluate_all("cs => cs.map(c => c.width)")
        assert min(widths) >= 3 * 32, widths
        page.wait_for_selector("#weights-chart[data-points='3']", timeout=10_000)
        assert page.locator("#weights-flat").is_hidden()  # full mixes: nothing to point to


def test_an_unconditional_result_png_is_a_grid_not_a_sliver(make_app, fake):
    http = make_app().test_client()
    spec = _run_job(fake, [NULL_CLASS] * 9, strategy="full", weights=[0.5, 0.5])
    job = http.get(f"/api/jobs/{spec.job_id}").get_json()
    assert job["cols"] == 3
    thumb = Image.open(io.BytesIO(http.get(f"/api/jobs/{spec.job_id}/result.png?scale=1").data))
    assert thumb.size == (3 * 34 + 2, 3 * 34 + 2)  # 3 x 3 (was 1 x 9: 36 x 308)
    several = _run_job(fake, [3, NULL_CLASS] * 8, strategy="full", weights=[0.5, 0.5])
    assert http.get(f"/api/jobs/{several.job_id}").get_json()["cols"] == 4  # a multiple of the labels
