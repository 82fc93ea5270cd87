"""Issue 40, part 1: tiles at laptop widths, in headless Chromium against a `ddm ui` process on a fake
cluster. Tiles wrap into rows at every width from 1024 to 2560 px (docs/WEBUI.md): for a 20-image and a
60-image job of the ten classes (one column per label, repeated), at 1024, 1280, 1400, 1600 and 2560 px,
loaded at that width and resized to it, every tile's box lies inside the tiles' box (none clipped) and the
page is no wider than the window. Before the fix a 20-image job was one row of 20 tiles at 32 px that
overflowed its 674 px box at 1400 px, and a 60-image job made the page 1737 px wide at 1280 px.
"""

from __future__ import annotations

import pytest

from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from tests.support.browser import chromium_page

WIDTHS = (1024, 1280, 1400, 1600, 2560)
HEIGHT = 800
# where the tiles lie: how many stick out of the tiles' box (or the stage's), and how wide the page is
LAYOUT = """() => {
  const box = document.querySelector('#tiles').getBoundingClientRect();
  const stage = document.querySelector('#stage').getBoundingClientRect();
  const tiles = [...document.querySelectorAll('#tiles .tile')].map((t) => t.getBoundingClientRect());
  const outside = (r, b) => r.left < b.left - 0.5 || r.right > b.right + 0.5;
  return {
    tiles: tiles.length,
    clipped: tiles.filter((r) => outside(r, box) || outside(r, stage)).length,
    box: [Math.round(box.left), Math.round(box.right)],
    span: [Math.min(...tiles.map((r) => r.left)), Math.max(...tiles.map((r) => r.right))].map(Math.round),
    columns: getComputedStyle(document.querySelector('#tiles')).gridTemplateColumns.split(' ').length,
    page: document.documentElement.scrollWidth,
    window: window.innerWidth,
  };
}"""


def _job(fake, n_per_label: int) -> JobSpec:
    spec = JobSpec.new(list(range(10)) * n_per_label, steps=1, strategy="oracle", guidance=1.0)
    fake.store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec))
    fake.frame(spec, 1)
    fake.finish(spec)
    return spec


def _check(page, n: int, width: int, how: str) -> None:
    page.wait_for_selector(f"#tiles figure:nth-child({n}) canvas", state="attached", timeout=10_000)
    page.wait_for_timeout(150)  # a resize rebuilds the tiles in its event
    got = page.evaluate(LAYOUT)
    where = f"{n} images at {width} px ({how}): {got}"
    assert got["tiles"] == n, where
    assert got["clipped"] == 0, where
    assert got["page"] <= got["window"], where
    assert got["columns"] % 10 == 0, where  # still one column per label, repeated


@pytest.mark.browser
def test_tiles_wrap_into_rows_at_every_laptop_and_desktop_width(ui_server, fake, fake_deployment):
    fake.publish(fake_deployment)
    fake.all_workers()
    jobs = {20: _job(fake, 2), 60: _job(fake, 6)}
    url = ui_server()
    with chromium_page(viewport={"width": WIDTHS[-1], "height": HEIGHT}) as page:
        for n, spec in jobs.items():
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": HEIGHT})
                page.goto(f"{url}/?w={width}#job={spec.job_id}")
                page.wait_for_selector("#stage[data-done='1']", timeout=15_000)
                _check(page, n, width, "loaded")
            for width in reversed(WIDTHS[:-1]):  # the same page, the window narrowed step by step
                page.set_viewport_size({"width": width, "height": HEIGHT})
                _check(page, n, width, "resized")
