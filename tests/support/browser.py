"""Headless Chromium for the browser tests: Debian's `chromium` package, driven by Playwright (never a
browser download)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = (
    "install Debian's Chromium and Playwright for Python: `apt-get update && apt-get install -y chromium` "
    "and `pip install playwright` (or `pip install -e '.[dev]'`); do NOT run `playwright install` - "
    f"the test drives {CHROMIUM} (`bash .ci/run` installs both)"
)


def require_browser():
    """Fail (never skip) when the browser or its driver is missing, saying how to install them."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: {INSTALL}")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail(f"the playwright package is missing: {INSTALL}")


def open_page(playwright, errors: list[str], viewport: dict | None = None):
    """(browser, page) of headless Chromium; the page's script errors and console errors are appended
    to `errors` (a test asserts it stays empty)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport=viewport) if viewport else browser.new_page()
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    return browser, page


@contextlib.contextmanager
def chromium_page(viewport: dict | None = None):
    """A page of headless Chromium for one test: fails (never skips) without the browser, closes it
    afterwards, and fails the test if the page logged a script or console error."""
    require_browser()
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_page(p, errors, viewport)
        try:
            yield page
        finally:
            browser.close()
    assert errors == [], errors


def open_connected(page, url: str, timeout_ms: int = 15_000) -> None:
    """Open the UI at `url` and wait until its Socket.IO connection is up (a submit before it is refused)."""
    page.goto(url)
    page.wait_for_selector("#conn.pill-ok", timeout=timeout_ms)


def submit_until_decoded(page, steps: int, shape: str = "3x32x32") -> str:
    """Submit the form of a latent deployment's page and wait until its job's image is decoded (tiles of
    `shape`), with no form error and every one of its `steps` previews streamed; the job's id."""
    page.click("#submit")
    page.wait_for_selector(f"#tiles[data-shape='{shape}'] .tile-canvas", timeout=30_000)
    page.wait_for_selector('#stage[data-decoded="1"]', timeout=180_000)
    assert page.is_hidden("#form-error")
    assert page.get_attribute("#strip", "data-frames") == str(steps)  # every step's preview arrived
    return page.evaluate("() => decodeURIComponent(location.hash.slice('#job='.length))")


def take_screenshot(page, shot: Path) -> None:
    """A full-page screenshot to `shot`, the pointer moved off the page first (no hover in the picture)."""
    page.mouse.move(0, 0)
    page.screenshot(path=str(shot), full_page=True)


def keep_screenshot(shot: Path, name: str | None = None) -> None:
    """Copy a test's screenshot into $DDM_SCREENSHOT_DIR when that is set (how docs/img is made), as
    `name` (default: its own name); nothing when the test never took it."""
    target = os.environ.get("DDM_SCREENSHOT_DIR")
    if target and shot.exists():
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / (name or shot.name))
