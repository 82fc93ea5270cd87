"""The router at work, in a real browser: `ddm up` on each shipped deployment (checkpoints/mnist: a
PyTorch and a JAX expert; checkpoints/fashion-mnist: four k-means experts, two of each framework; both
with a learned router, which reads x_t for unconditional images) on the real RabbitMQ and Redis, driven
by headless Chromium through Playwright.

Where the deployment offers the oracle (disjoint label sets), the page refuses an unconditional job
under it (the label names the expert, and there is none); then it runs one under `full`: the weights
chart follows the watched image step by step, one point per step, and its weights shift between the
experts as the image forms (read from the chart's data attributes and text, not from pixels), and the
job's result equals the local sampler's for the same spec within 1e-4 (pipeline == local on each shipped
deployment; test_browser_latent.py and test_browser_text_shipped.py do the same on the emoji ones). The form
names the deployment's classes, the cluster panel what each expert was trained on. Saves a screenshot
under tmp (and in DDM_SCREENSHOT_DIR when set).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.client.client import Client
from ddm.schema.deployment import Deployment
from ddm.schema.settings import Settings
from ddm.webui.jobs import trained_on
from tests.support.browser import keep_screenshot, open_page, require_browser, take_screenshot
from tests.support.fakes import descriptor_of
from tests.support.harness import ddm_up_with_ui, local_reference
from tests.support.openai_check import openai_equals_ddm_sample

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
# deployment -> (its screenshot's name in docs/img, whether it offers the oracle: only disjoint label sets do)
SHIPPED = {"mnist": ("webui-weights.png", True), "fashion-mnist": ("webui-weights-fashion.png", False)}
STEPS = 20
IMAGES = 3


def _weights(row: str) -> list[float]:
    return [float(w) for w in row.split(",")]


@pytest.mark.browser
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_an_unconditional_job_shows_the_router_shift_weight_over_t(name, prefix, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    deployment = Deployment.load(CHECKPOINTS / name / "deployment.toml")
    k = deployment.num_experts
    screenshot, has_oracle = SHIPPED[name]
    shot = tmp_path / screenshot
    errors: list[str] = []
    with ddm_up_with_ui(deployment.path, prefix, buckets="1,4") as (env, url), sync_playwright() as p:
        browser, page = open_page(p, errors, viewport={"width": 1440, "height": 1100})
        page.goto(url)
        for e in range(k):
            page.wait_for_selector(f'.worker[data-expert="{e}"][data-alive="1"]', timeout=60_000)
        # the class picker names the deployment's classes
        names = page.locator("#classes label span").all_text_contents()
        assert names == list(deployment.class_names), names
        # and the cluster panel what each expert was trained on (k-means: its largest label shares)
        described = descriptor_of(deployment.path)
        facts = page.locator(".expert-card .expert-facts span:first-child").all_text_contents()
        assert facts == ["trained on " + trained_on(described, e) for e in described.experts], facts
        assert all(("%" in f) == (name == "fashion-mnist") for f in facts), facts

        # unconditional images only, several of them
        page.click("#clear-classes")
        page.check("#unconditional")
        page.fill("#n_per_label", str(IMAGES))
        page.fill("#steps", str(STEPS))
        page.fill("#seed", "7")

        strategies = page.locator("#strategy option").evaluate_all("os => os.map(o => o.value)")
        assert ("oracle" in strategies) == has_oracle, strategies
        if has_oracle:
            # the oracle reads the label, and these images have none: said next to the form, refused
            page.select_option("#strategy", "oracle")
            assert "oracle routes by the label" in page.text_content("#strategy-hint")
            page.click("#submit")
            page.wait_for_selector("#form-error:not([hidden])", timeout=10_000)
            error = page.text_content("#form-error")
            assert "Bad input" in error and "strategy 'oracle'" in error and "null label 10" in error

        # under full the router reads x_t and weighs every expert at every step
        page.select_option("#strategy", "full")
        page.click("#submit")
        page.wait_for_selector('#stage[data-done="1"]', timeout=120_000)
        assert page.is_hidden("#form-error")
        assert page.locator(".tile-cap").all_text_contents() == ["unconditional"] * IMAGES
        assert "unconditional" in page.text_content("#job-sub")

        # the pipeline's result equals the local sampler's for the spec the page submitted
        job_id = page.evaluate("() => decodeURIComponent(location.hash.slice('#job='.length))")
        with Client(settings=Settings.from_env(env)) as client:
            result, submitted = client.result(job_id, timeout=30), client.status(job_id).spec
        diff = float(np.abs(result - local_reference(deployment.path, submitted)).max())
        assert diff <= 1e-4, diff
        # a class by its name through the OpenAI endpoint, with and without streaming (issue 39)
        print(openai_equals_ddm_sample(url, env, deployment.path, deployment.class_names[3], steps=8, seed=3))

        # the chart of the watched image (the first): one point per step, and the same in its table
        chart = "#weights-chart"
        page.wait_for_function(
            f"() => document.querySelector('{chart}').dataset.points === '{STEPS}'", timeout=10_000
        )
        assert page.is_visible(chart) and page.get_attribute(chart, "data-image") == "0"
        assert page.locator(f"{chart} path.warea").count() == k  # an area per expert
        rows = page.locator("#weights-rows tr")
        assert rows.count() == STEPS
        assert [rows.nth(i).get_attribute("data-step") for i in range(STEPS)] == [
            str(s) for s in range(1, STEPS + 1)
        ]
        first = _weights(rows.nth(0).get_attribute("data-weights"))
        last = _weights(rows.nth(STEPS - 1).get_attribute("data-weights"))
        assert rows.nth(0).get_attribute("data-t") == "0.0000"
        assert abs(sum(first) - 1) < 0.01 and abs(sum(last) - 1) < 0.01
        top = max(range(len(last)), key=last.__getitem__)
        shift = abs(last[top] - first[top])
        argmax_changed = max(range(len(first)), key=first.__getitem__) != top
        assert shift > 0.2 or argmax_changed, (first, last)  # the router decided as the image formed
        served = ",".join(str(e) for e in range(k))
        assert rows.nth(0).get_attribute("data-served") == served  # full: every expert served

        # the readout: a labelled bar per expert at the shown step, its weight in % and who served
        readout = page.locator("#weights-now .wnow-row")
        assert readout.count() == k
        assert page.get_attribute("#weights-now", "data-step") == str(STEPS)
        shown = [float(readout.nth(e).get_attribute("data-weight")) for e in range(k)]
        assert shown == pytest.approx(last, abs=1e-3)
        assert f"{100 * last[top]:.1f}%" in page.text_content("#weights-now")
        # the keyboard moves through the steps: Home reads out step 1
        page.focus(chart)
        page.keyboard.press("Home")
        page.wait_for_function("() => document.querySelector('#weights-now').dataset.step === '1'")
        assert f"{100 * first[top]:.1f}%" in page.text_content("#weights-now")

        # a small chart per image; choosing another one follows that image
        minis = page.locator("#weights-minis .wmini")
        assert minis.count() == IMAGES
        assert "step 1 expert" in minis.nth(0).get_attribute("title")
        minis.nth(2).click()
        page.wait_for_function(f"() => document.querySelector('{chart}').dataset.image === '2'")
        assert minis.nth(2).get_attribute("aria-pressed") == "true"
        assert page.locator("#weights-rows tr").count() == STEPS
        assert page.locator(".tile.tile-selected").count() == 1
        take_screenshot(page, shot)
        browser.close()
    keep_screenshot(shot)
    assert not errors, errors
    print(f"\n{name}: weights of image 1 at step 1 {first}, at step {STEPS} {last}; screenshot {shot}")
