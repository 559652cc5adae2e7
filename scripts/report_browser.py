"""A report page in a real headless browser: Chromium through Playwright, for the report's test and screenshot.

Playwright's own browser download (`playwright install`) is never used: the browser is the
system's Chromium (Debian's `chromium-headless-shell` or `chromium`, which scripts/setup.sh
installs where it may), or the one `PROBES_CHROMIUM` names. Used by
tests/analysis/test_report_browser.py and scripts/report_screenshot.py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: the environment variable naming a Chromium binary, before the ones looked for on PATH
CHROMIUM_ENV = "PROBES_CHROMIUM"
#: Chromium binaries, the lightest first
CHROMIUM_NAMES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: (width, height) of the checked viewports: a phone and a desktop
PHONE = (375, 800)
DESKTOP = (1440, 900)


def chromium_path() -> str | None:
    """The Chromium binary to launch: `PROBES_CHROMIUM`, else the first of `CHROMIUM_NAMES` on PATH; None if none."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return named if Path(named).is_file() else None
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright `Browser`), closed on exit."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError(f"no Chromium found: install chromium-headless-shell or set {CHROMIUM_ENV}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path)  # Playwright adds --no-sandbox (CI runs as root)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def opened(browser: Any, page_file: Path, size: tuple[int, int]) -> Iterator[tuple[Any, list[str]]]:
    """(page, problems): `page_file` loaded at viewport `size`; problems collects console errors and page errors."""
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    problems: list[str] = []

    def console(message: Any) -> None:
        if message.type == "error":
            problems.append(f"console error: {message.text}")

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
    try:
        page.goto(Path(page_file).resolve().as_uri(), wait_until="load")
        yield page, problems
    finally:
        page.close()


def screenshot(page_file: Path, out: Path, size: tuple[int, int] = DESKTOP, *, full_page: bool = False) -> Path:
    """A PNG of `page_file` as a browser at `size` shows it (the first screen, or the whole page)."""
    with chromium() as browser, opened(browser, page_file, size) as (page, problems):
        if problems:
            raise RuntimeError(f"{page_file} did not load cleanly: " + "; ".join(problems))
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=full_page)
    return out
