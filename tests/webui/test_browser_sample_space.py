"""The page in a colour sample space (issue 25, part 6), in headless Chromium against a `ddm ui` process on
a FAKE cluster: a descriptor for a 3x32x32 RGB space with the 9 emoji groups as classes and four experts
whose cards differ (architectures, frameworks, objectives), and SYNTHETIC frames (seeded noise blending
into a coloured disk per image, not the output of any model) written as the router writes them, while
the page watches. Checks: the frames stream, the tiles are sized by the space and drawn in RGB (a
canvas pixel equals the frame's colour; the result PNG is RGB), the class names label the form and the
tiles, the cluster panel shows the sample space and each expert's card; and a job whose frames are
3x16x24 gets tiles of that shape. The shipped RGB deployments in a browser are
tests/webui/test_browser_latent.py and test_browser_text_shipped.py (docs/WEBUI.md's screenshots).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ddm.schema.messages import Frame, JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY
from ddm.webui.cards import card_text
from ddm.webui.pixels import to_pixels
from tests.support.browser import chromium_page, keep_screenshot, take_screenshot
from tests.webui.colour_fake import CARDS, GROUPS, STEPS, beat, emoji_descriptor, write_frame


@pytest.mark.browser
def test_an_rgb_sample_space_streams_in_colour_with_the_experts_cards(ui_server, fake, tmp_path):
    descriptor = emoji_descriptor()
    fake.store.publish_descriptor(descriptor, 60)
    for k, (framework, *_) in enumerate(CARDS):
        beat(fake, f"w-e{k}", "expert", framework, k)
    beat(fake, "w-router", "router")
    spec = JobSpec.new(list(range(len(GROUPS))), steps=STEPS, strategy="topk:2", guidance=1.5)
    fake.store.start(
        spec.job_id, "w-router", 0, ResolvedJob.of(spec, descriptor.sample_space)
    )  # as its router
    url = ui_server()
    shot = tmp_path / "webui-emoji-fake.png"
    try:
        with chromium_page(viewport={"width": 1440, "height": 1000}) as page:
            page.goto(f"{url}/#job={spec.job_id}")
            # the form and the tiles carry the space's class names; the tiles are sized by its shape
            assert page.locator("#classes label span").all_text_contents() == list(GROUPS)
            page.wait_for_selector("#tiles[data-shape='3x32x32'] .tile-canvas", timeout=10_000)
            assert page.locator(".tile-cap").all_text_contents() == list(GROUPS)

            # frames stream in while the page watches
            for step in range(1, STEPS + 1):
                x = write_frame(fake, spec, step)
                if step == 2:
                    page.wait_for_function("() => document.querySelector('#strip').dataset.frames === '2'")
            fake.store.finish(spec.job_id, x)
            page.wait_for_selector('#stage[data-done="1"]', timeout=10_000)
            assert page.get_attribute("#strip", "data-frames") == str(STEPS)

            # RGB tiles: a pixel of every canvas is the final frame's colour there, as to_pixels maps it
            want, channels = to_pixels(x.astype(np.float16).astype(np.float32))
            assert channels == 3
            got = page.evaluate(
                """() => [...document.querySelectorAll('.tile-canvas')].map((c) => {
                    const s = c.width / 32;
                    const ctx = c.getContext('2d');
                    const at = (r, col) =>
                        Array.from(ctx.getImageData((col + 0.5) * s, (r + 0.5) * s, 1, 1).data.slice(0, 3));
                    return [at(16, 16), at(2, 2), c.width, c.height];
                })"""
            )
            assert len(got) == spec.n
            for i, (centre, corner, width, height) in enumerate(got):
                assert width == height and width % 32 == 0 and width >= 64, (width, height)
                assert centre == want[i, 16, 16].tolist(), (i, centre)
                assert corner == want[i, 2, 2].tolist(), (i, corner)
            assert len({tuple(c) for c, *_ in got}) == spec.n  # nine colours, not nine greys
            # and the result, one PNG grid: RGB too (IHDR colour type 2)
            png = page.request.get(f"{url}/api/jobs/{spec.job_id}/result.png")
            assert png.status == 200 and png.body()[:8] == b"\x89PNG\r\n\x1a\n" and png.body()[25] == 2

            # the cluster panel: what a sample is, and each expert's card
            assert "3x32x32" in page.text_content("#sample-space")
            cards = page.locator(".expert-card")
            assert cards.count() == len(CARDS)
            for k in range(len(CARDS)):
                text = card_text(descriptor.experts[k].card)
                assert cards.nth(k).get_attribute("data-card") == text
                assert cards.nth(k).locator(".expert-arch").text_content() == text
            assert cards.nth(1).locator(".expert-arch").text_content() == "DiT · Flax · DDPM ε (cosine)"
            take_screenshot(page, shot)

            # any H x W: a job whose frames are 3x16x24 gets tiles of that shape, whole-pixel upscaled
            small = JobSpec.new([0, 8], steps=1, strategy="topk:2", guidance=1.5)
            small_space = dataclasses.replace(descriptor.sample_space, shape=(3, 16, 24))
            fake.store.start(small.job_id, "w-router", 0, ResolvedJob.of(small, small_space))
            x = np.full((2, 3, 16, 24), -1.0, np.float32)
            x[1, 1, 3, 5] = 1.0  # one green pixel in image 1, row 3, column 5
            weights = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], np.float32)
            fake.store.write_step(Frame.from_latent(small.job_id, 1, 1.0, x, [0, 3], weights, 9.0), x, 9.0)
            fake.store.finish(small.job_id, x)
            page.goto(f"{url}/?small=1#job={small.job_id}")
            page.wait_for_selector("#tiles[data-shape='3x16x24']", timeout=10_000)
            page.wait_for_selector('#stage[data-done="1"]', timeout=10_000)
            sizes = page.evaluate(
                """() => [...document.querySelectorAll('.tile-canvas')].map((c) => {
                    const s = c.width / 24;
                    const px = c.getContext('2d').getImageData((5 + 0.5) * s, (3 + 0.5) * s, 1, 1).data;
                    return [c.width, c.height, Array.from(px.slice(0, 3))];
                })"""
            )
            assert all(w % 24 == 0 and w * 16 == h * 24 for w, h, _ in sizes), sizes  # 24 wide, 16 high
            assert sizes[0][2] == [0, 0, 0] and sizes[1][2] == [0, 255, 0], sizes
    finally:
        keep_screenshot(shot)


FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat")
FASHION += ("Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


@pytest.mark.browser
def test_history_keeps_its_names_after_the_deployment_changes(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)
    fake.all_workers()
    old = JobSpec.new([3, 8], steps=2, strategy="oracle", guidance=1.0)  # an MNIST job of 3 and 8
    fake.store.start(old.job_id, "w-router", 0, ResolvedJob.of(old, LEGACY), old, deployment="mnist")
    unrecorded = JobSpec.new([3, 8], steps=2, strategy="oracle", guidance=1.0)
    fake.store.start(unrecorded.job_id, "w-router", 0, ResolvedJob.of(unrecorded, LEGACY), unrecorded)
    for spec in (old, unrecorded):
        for step in (1, 2):
            fake.frame(spec, step)
        fake.finish(spec)
    fake.r.hdel(fake.names.job(unrecorded.job_id), "space", "image_space", "deployment")  # an older router's
    # the prefix now serves Fashion-MNIST, where 3 is "Dress" and 8 is "Bag"
    fake.publish(fake_deployment, name="fashion", class_names=FASHION, sample_space=None)
    url = ui_server()
    with chromium_page(viewport={"width": 1440, "height": 1000}) as page:
        page.goto(url)
        page.wait_for_selector(f"#recent-body tr[data-job-id='{unrecorded.job_id}']", timeout=15_000)
        assert page.locator("#classes .chip span").all_text_contents() == list(FASHION)  # the serving names
        labels = page.locator(f"#recent-body tr[data-job-id='{old.job_id}'] td:nth-child(4)")
        assert labels.text_content() == "3 8"  # was "Dress, Bag"
        before = page.locator(f"#recent-body tr[data-job-id='{unrecorded.job_id}'] td:nth-child(4)")
        assert before.text_content() == "Dress, Bag"  # no record: the serving deployment's names

        # the job view: its caption, its tiles and the weights chart name the job's own classes
        page.goto(f"{url}/?view=1#job={old.job_id}")
        page.wait_for_selector("#stage[data-done='1']", timeout=15_000)
        page.locator("#job-sub", has_text="2 images of 3 8").wait_for(timeout=10_000)
        assert page.locator(".tile-cap").all_text_contents() == ["3", "8"]
        assert page.text_content("#weights-image") == "image 1 · 3"
        assert page.locator(".wmini-label").all_text_contents() == ["3", "8"]
