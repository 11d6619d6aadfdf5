"""Headless Chromium driven by Playwright, for the dashboard's tests and its docs screenshot.

The system's Chromium is launched (`playwright install` is never needed), with no network of its
own: no background requests, updates or sync, so every request recorded is one the page made.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Recorded:
    """What a page did besides drawing: every request, and every error it logged (a script's,
    or a request its Content-Security-Policy refused)."""

    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def chromium(
    executable: str, width: int = 1280, height: int = 1000
) -> Iterator[tuple[Any, Recorded]]:
    """A page in a fresh headless Chromium, and what it does."""
    from playwright.sync_api import sync_playwright

    recorded = Recorded()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("request", lambda request: recorded.requests.append(request.url))
            page.on("pageerror", lambda err: recorded.errors.append(str(err)))
            page.on(
                "console",
                lambda msg: recorded.errors.append(msg.text) if msg.type == "error" else None,
            )
            yield page, recorded
        finally:
            browser.close()


def inked(png: bytes, background: tuple[int, int, int] = (255, 255, 255)) -> tuple[float, int]:
    """(the share of pixels that are not the background, how many colours there are) in a PNG:
    a blank canvas has neither."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        pixels = image.convert("RGB")
        colours = pixels.getcolors(maxcolors=1 << 24) or []
    total = sum(n for n, _ in colours)
    blank = sum(n for n, c in colours if c == background)
    return (total - blank) / total, len(colours)


def has_colour(png: bytes, rgb: tuple[int, int, int], tolerance: int = 24) -> bool:
    """Whether a colour close to `rgb` is drawn somewhere in the PNG."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return any(
        sum(abs(a - b) for a, b in zip(c, rgb, strict=True)) <= tolerance for _, c in colours
    )
