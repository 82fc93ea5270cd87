"""The shipped text deployment, checkpoints/emoji-text/, in a real browser (issue 37): `ddm up` of its four
latent experts (two PyTorch, two Flax), its prompt-aware router, the text encoder and the decoder stage
on the real RabbitMQ and Redis, driven by headless Chromium. A prompt typed in the box streams every
step's preview, then the decoded emoji; the pipeline's latents and pixels equal `ddm sample`'s (the
in-process sampler and decoder) for the spec the page submitted. Saves README's screenshot:

    DDM_SCREENSHOT_DIR=docs/img python -m pytest tests/webui/test_browser_text_shipped.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.client.client import Client
from ddm.router.deployment_loader import load_decoder
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from ddm.schema.settings import Settings
from tests.support.browser import (
    chromium_page,
    keep_screenshot,
    require_browser,
    submit_until_decoded,
    take_screenshot,
)
from tests.support.harness import ddm_up_with_ui, decoded_gap, local_reference
from tests.support.openai_check import openai_equals_ddm_sample
from tests.support.text import needs_text_encoder

DEPLOYMENT = Path(__file__).resolve().parents[2] / "checkpoints" / "emoji-text" / "deployment.toml"
PROMPT = "red heart"
STEPS = 12


def foreground_colour(pixels: np.ndarray) -> tuple[float, float, float]:
    """Mean (red, green, blue) in [0, 1] of pixels [n, 3, H, W] in [-1, 1] away from the grey background."""
    rgb = (np.clip(pixels, -1, 1) + 1) / 2
    foreground = np.abs(pixels).max(1) > 0.2
    return tuple(float(rgb[:, c][foreground].mean()) for c in range(3))


@pytest.mark.browser
def test_a_prompt_on_the_shipped_text_deployment_streams_and_equals_ddm_sample(prefix, tmp_path):
    require_browser()
    needs_text_encoder()
    deployment = Deployment.load(DEPLOYMENT)
    shot = tmp_path / "webui-text.png"
    with ddm_up_with_ui(DEPLOYMENT, prefix) as (env, url):
        client = Client(settings=Settings.from_env(env))
        with chromium_page(viewport={"width": 1440, "height": 1100}) as page:
            page.goto(url)
            for e in range(deployment.num_experts):
                page.wait_for_selector(f'.worker[data-expert="{e}"][data-alive="1"]', timeout=90_000)
            page.wait_for_selector("#examples .example-prompt", timeout=15_000)
            examples = page.locator("#examples .example-prompt").all_text_contents()
            assert examples == list(deployment.example_prompts)
            page.fill("#prompt", "")
            page.type("#prompt", PROMPT)
            page.fill("#n_per_label", "4")
            page.fill("#steps", str(STEPS))
            page.fill("#seed", "5")
            job_id = submit_until_decoded(page, STEPS)

            spec = client.status(job_id).spec
            assert spec.prompt == PROMPT and len(spec.labels) == 4
            pixels, diff = decoded_gap(client, job_id, DEPLOYMENT, spec)
            print(f"emoji-text: max |pipeline - local| = {diff:.2e} (latents and decoded pixels)")
            assert diff <= 1e-4
            red, green, blue = foreground_colour(pixels)  # a red heart is red
            assert red > green + 0.2 and red > blue + 0.2, (red, green, blue)
            # and a blue heart blue (in-process, as ddm sample: the pipeline equals it, above); it once
            # drew white, the router sending it to the expert whose cluster holds the white heart
            blue_spec = JobSpec.new([None] * 2, steps=STEPS, seed=5, prompt="blue heart")
            red, green, blue = foreground_colour(
                load_decoder(deployment).decode(local_reference(DEPLOYMENT, blue_spec))
            )
            assert blue > red + 0.2 and blue > green + 0.1, (red, green, blue)
            take_screenshot(page, shot)
        # the same deployment through the OpenAI endpoint, with and without streaming (issue 39)
        print(openai_equals_ddm_sample(url, env, DEPLOYMENT, PROMPT, steps=STEPS, seed=5))
        client.close()
    keep_screenshot(shot)
