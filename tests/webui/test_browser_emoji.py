"""The shipped colour deployment in a real browser: `ddm up` on checkpoints/emoji (3x32x32 RGB emoji, four
k-means experts: UNets and DiTs in PyTorch and Flax, trained on the flow velocity, DDPM eps and DDPM v)
on the real RabbitMQ and Redis, driven by headless Chromium through Playwright.

The cluster panel shows the sample space and each expert's card (architecture, framework, objective) as
the router published it; a job submitted from the form (top-2) streams every step's frame; its result
equals the local sampler's for the same spec within 1e-4 (the pipeline == local check on this shipped
deployment); its tiles are drawn in RGB, and a pixel of each tile is the colour of the stored result
there (mapped by the one pixel rule, webui/pixels.py). Saves the screenshot docs/WEBUI.md shows:

    DDM_SCREENSHOT_DIR=docs/img python -m pytest tests/webui/test_browser_emoji.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.client.client import Client
from ddm.schema.deployment import Deployment
from ddm.schema.settings import Settings
from ddm.webui.cards import card_text
from ddm.webui.pixels import to_pixels
from tests.support.browser import keep_screenshot, open_page, require_browser, take_screenshot
from tests.support.harness import ddm_up_with_ui, local_reference

DEPLOYMENT = Path(__file__).resolve().parents[2] / "checkpoints" / "emoji" / "deployment.toml"
STEPS = 10


@pytest.mark.browser
def test_the_emoji_deployment_streams_rgb_tiles_and_shows_each_experts_card(prefix, tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    deployment = Deployment.load(DEPLOYMENT)
    space, k = deployment.sample_space, deployment.num_experts
    shot = tmp_path / "webui-emoji.png"
    errors: list[str] = []
    with ddm_up_with_ui(DEPLOYMENT, prefix) as (env, url):
        client = Client(settings=Settings.from_env(env))
        described = client.deployment()
        with sync_playwright() as p:
            browser, page = open_page(p, errors, viewport={"width": 1440, "height": 1100})
            page.goto(url)
            for e in range(k):
                page.wait_for_selector(f'.worker[data-expert="{e}"][data-alive="1"]', timeout=60_000)
            # the form names the 9 groups; the cluster panel says what a sample is and each expert's card
            assert page.locator("#classes label span").all_text_contents() == list(space.class_names)
            assert "3x32x32" in page.text_content("#sample-space")
            cards = page.locator(".expert-card")
            assert cards.count() == k
            texts = [card_text(described.experts[e].card) for e in range(k)]
            for e, text in enumerate(texts):
                assert cards.nth(e).locator(".expert-arch").text_content() == text
            assert any("DiT" in t for t in texts) and any("UNet" in t for t in texts), texts
            assert any("Flax" in t for t in texts) and any("PyTorch" in t for t in texts), texts
            assert any("DDPM" in t for t in texts) and any("velocity" in t for t in texts), texts

            # one image per group, from the form
            page.click("#all-classes")
            page.fill("#n_per_label", "1")
            page.fill("#steps", str(STEPS))
            page.fill("#seed", "3")
            page.select_option("#strategy", "topk:2")  # two experts mix in most images at most steps
            page.click("#submit")
            page.wait_for_selector("#tiles[data-shape='3x32x32'] .tile-canvas", timeout=30_000)
            page.wait_for_selector('#stage[data-done="1"]', timeout=180_000)
            assert page.is_hidden("#form-error")
            assert page.get_attribute("#strip", "data-frames") == str(STEPS)  # every step's frame arrived
            assert page.locator(".tile-cap").all_text_contents() == list(space.class_names)

            # the pipeline's result equals the local sampler's for the job the page submitted
            job_id = page.evaluate("() => decodeURIComponent(location.hash.slice('#job='.length))")
            result = client.result(job_id, timeout=30)
            submitted = client.status(job_id).spec
            diff = float(np.abs(result - local_reference(DEPLOYMENT, submitted)).max())
            print(f"emoji: max |pipeline - local| = {diff:.2e}")
            assert diff <= 1e-4

            # the tiles are that result, in colour
            want, channels = to_pixels(result.astype(np.float16).astype(np.float32))  # frames travel as fp16
            assert channels == 3 and result.shape == (space.num_classes, *space.shape)
            got = page.evaluate(
                """() => [...document.querySelectorAll('.tile-canvas')].map((c) => {
                    const s = c.width / 32;
                    const px = c.getContext('2d').getImageData(16.5 * s, 16.5 * s, 1, 1).data;
                    return Array.from(px.slice(0, 3));
                })"""
            )
            assert len(got) == space.num_classes
            for i, colour in enumerate(got):
                assert np.abs(np.array(colour) - want[i, 16, 16]).max() <= 1, (i, colour, want[i, 16, 16])
            assert any(len(set(c)) > 1 for c in got), got  # colour, not grey
            take_screenshot(page, shot)
            browser.close()
        client.close()
    keep_screenshot(shot)
    assert not errors, errors
