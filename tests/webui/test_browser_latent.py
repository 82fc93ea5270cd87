"""The shipped latent deployment in a real browser: `ddm up` on checkpoints/emoji-latent (four experts on
the 4x8x8 latents of our own autoencoder, its decoder worker on ddm.decoder) on the real RabbitMQ and
Redis, driven by headless Chromium through Playwright.

Every step's frame streams as the decoder's linear latent -> RGB preview at the pixels' size (a tile
pixel is the preview of the stored frame there); when the job is done the decoded image replaces the
previews (a tile pixel is the stored result's); the pipeline's result (latents and pixels) equals
`ddm sample`'s in-process decoding within 1e-4. Saves the screenshot docs/SERVING.md shows:

    DDM_SCREENSHOT_DIR=docs/img python -m pytest tests/webui/test_browser_latent.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.client.client import Client
from ddm.schema.deployment import Deployment
from ddm.schema.settings import Settings
from ddm.webui.pixels import to_pixels
from tests.support.browser import (
    chromium_page,
    keep_screenshot,
    require_browser,
    submit_until_decoded,
    take_screenshot,
)
from tests.support.harness import ddm_up_with_ui, decoded_gap

DEPLOYMENT = Path(__file__).resolve().parents[2] / "checkpoints" / "emoji-latent" / "deployment.toml"
STEPS = 10
TILE_PIXELS = """(at) => [...document.querySelectorAll('.tile-canvas')].map((c) => {
    const s = c.width / 32;
    const px = c.getContext('2d').getImageData(at * s + 0.5 * s, at * s + 0.5 * s, 1, 1).data;
    return Array.from(px.slice(0, 3));
})"""

SCRUB = """(step) => {
    const s = document.getElementById('scrub');
    s.value = String(step);
    s.dispatchEvent(new Event('input'));
}"""


def assert_tiles(got: list, want: np.ndarray, at: int) -> None:
    """Each tile's pixel (at, at) is want[i, at, at] (uint8 RGB) within one level."""
    assert len(got) == len(want)
    for i, colour in enumerate(got):
        assert np.abs(np.array(colour) - want[i, at, at].astype(int)).max() <= 1, (i, colour, want[i, at, at])


@pytest.mark.browser
def test_the_latent_deployment_streams_previews_then_the_decoded_image(prefix, tmp_path):
    require_browser()
    deployment = Deployment.load(DEPLOYMENT)
    space = deployment.sample_space
    shot = tmp_path / "webui-latent.png"
    with ddm_up_with_ui(DEPLOYMENT, prefix) as (env, url):
        client = Client(settings=Settings.from_env(env))
        decoder = client.deployment().decoder
        assert decoder is not None and "ae-" in decoder.encoder_id
        with chromium_page(viewport={"width": 1440, "height": 1100}) as page:
            page.goto(url)
            page.wait_for_selector('.worker[data-expert="0"][data-alive="1"]', timeout=60_000)
            assert "latents 4x8x8" in page.text_content("#sample-space")
            assert "linear preview" in page.text_content("#sample-space")
            page.click("#all-classes")
            page.fill("#n_per_label", "1")
            page.fill("#steps", str(STEPS))
            page.fill("#seed", "3")
            job_id = submit_until_decoded(page, STEPS)

            # the pipeline equals the in-process sampler and decoder for the job the page submitted
            pixels, diff = decoded_gap(client, job_id, DEPLOYMENT, client.status(job_id).spec)
            print(f"emoji-latent: max |pipeline - local| = {diff:.2e} (latents and decoded pixels)")
            assert diff <= 1e-4 and pixels.shape == (space.num_classes, 3, 32, 32)

            # the last step shows the decoded image...
            assert "decoded" in page.text_content("#scrub-label")
            assert_tiles(page.evaluate(TILE_PIXELS, 16), to_pixels(pixels)[0], 16)
            # ...and scrubbing back shows that step's preview of its stored latent
            frames = list(client.frames(job_id, follow=False))
            page.evaluate(SCRUB, STEPS - 1)
            assert "preview" in page.text_content("#scrub-label")
            latent = frames[STEPS - 2].x.astype(np.float32)  # step STEPS - 1
            shown = to_pixels(decoder.preview.apply(latent, decoder.upscale(space.shape)))[0]
            assert_tiles(page.evaluate(TILE_PIXELS, 16), shown, 16)
            page.evaluate(SCRUB, STEPS)
            take_screenshot(page, shot)
        client.close()
    keep_screenshot(shot)
