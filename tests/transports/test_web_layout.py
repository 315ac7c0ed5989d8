"""The page from 360 px wide to a wide screen (system Chromium, a real ``pitrio serve``): the
session list collapses behind a button on narrow screens, the text box keeps its width, nothing
scrolls sideways; the favicon is served."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.transports.browser import (
    ONE_PROCESS,
    Served,
    browser,
    needs_chromium,
    open_page,
    page,
    prompt,
    served,
)

__all__ = ["browser", "page", "served"]  # fixtures used by name
pytestmark = needs_chromium


@pytest.fixture
def daemon_options() -> tuple[str, ...]:
    """The daemons of ``served`` and ``mocked``: one process (checks of the page alone)."""
    return ONE_PROCESS


def sideways_overflow(page: Any) -> int:
    """How many pixels the page is wider than its viewport."""
    return int(page.evaluate("() => document.documentElement.scrollWidth - innerWidth"))


@pytest.mark.parametrize("width", [360, 420])
def test_a_narrow_screen_hides_the_sessions_behind_a_button(
    page: Any, served: Served, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 740})
    open_page(page, served)
    sidebar = page.locator("#sidebar")
    expect(sidebar).not_to_be_in_viewport()
    toggle = page.locator("#sidebar-toggle")
    expect(toggle).to_be_visible()
    toggle.click()
    expect(sidebar).to_be_in_viewport(ratio=1)
    page.click("#new-session")  # choosing hides the list again
    expect(page.locator("#sessions li")).to_have_count(1)
    expect(page.locator("body[data-connected]")).to_have_count(1)
    expect(sidebar).not_to_be_in_viewport()
    box = page.locator("#prompt").bounding_box()
    assert box is not None and box["width"] >= width - 40, box  # the whole width, less padding
    text = "a reply that is long enough to wrap on a narrow screen " * 3
    prompt(page, text)
    # The reply as finally drawn (its streamed drawing is replaced when it ends): "idle" may
    # show before the run even started, and the streamed text before the final drawing.
    expect(page.locator(".msg.assistant:not(.streaming) .md")).to_have_text(text.strip())
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator(".msg.assistant .md")).to_contain_text("long enough to wrap")
    assert sideways_overflow(page) <= 0
    page.locator("#sidebar-toggle").click()
    expect(sidebar).to_be_in_viewport(ratio=1)
    page.locator("#sidebar-close").click()
    expect(sidebar).not_to_be_in_viewport()


def test_a_wide_screen_shows_the_sessions_beside_the_chat(page: Any, served: Served) -> None:
    page.set_viewport_size({"width": 1600, "height": 900})
    open_page(page, served)
    expect(page.locator("#sidebar")).to_be_in_viewport(ratio=1)
    expect(page.locator("#sidebar-toggle")).to_be_hidden()
    box = page.locator("#prompt").bounding_box()
    assert box is not None and box["width"] > 900, box
    assert sideways_overflow(page) <= 0


def test_the_favicon_is_served(page: Any, served: Served) -> None:
    open_page(page, served)
    icon = page.locator("link[rel=icon]")
    assert icon.get_attribute("href") == "/favicon.svg"
    for path in ("/favicon.svg", "/favicon.ico"):
        reply = page.request.get(served.url.rstrip("/") + path)
        assert reply.status == 200, path
        assert reply.headers["content-type"] == "image/svg+xml"
        assert reply.body().startswith(b"<svg")
