"""The daemon's web page in the system Chromium (Playwright) against a real ``pitrio serve``:
create a session, prompt, stream, abort."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.transports.browser import Served, browser, needs_chromium, page, served

__all__ = ["browser", "page", "served"]  # fixtures used by name
pytestmark = needs_chromium


def open_page(page: Any, served: Served) -> None:
    """Load the page with the token and wait until the host socket is up."""
    page.goto(served.page_url)
    expect(page.locator("#host-status.on")).to_be_visible()


def new_session(page: Any) -> None:
    """Create a session and wait until its socket is attached."""
    before = page.locator("#sessions li").count()
    page.click("#new-session")
    expect(page.locator("#sessions li")).to_have_count(before + 1)
    expect(page.locator("body[data-connected]")).to_have_count(1)


def test_page_creates_a_session_streams_and_aborts(page: Any, served: Served) -> None:
    open_page(page, served)
    # The token left the address bar (it only travels in the fragment).
    assert "token" not in page.url
    new_session(page)
    page.fill("#prompt", "hello from the browser")
    page.click("#send")
    expect(page.locator(".msg.assistant .text").last).to_have_text("hello from the browser")
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator("#usage")).to_contain_text("tokens")
    # A long reply: abort it while it streams.
    page.fill("#prompt", "word " * 400)
    page.click("#send")
    expect(page.locator("#status")).to_have_text("streaming")
    expect(page.locator(".msg.assistant.streaming .text")).to_have_count(1)
    page.click("#abort")
    expect(page.locator(".msg.assistant.error")).to_have_count(1)
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator(".msg.assistant.error")).to_contain_text("aborted", ignore_case=True)
    assert page.errors == []
