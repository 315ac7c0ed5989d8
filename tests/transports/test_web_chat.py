"""The daemon's web page in the system Chromium (Playwright) against a real ``pitrio serve``:
create a session, prompt, stream, abort."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from tests.transports.browser import (
    MockLLM,
    Served,
    answer,
    browser,
    event,
    log_frames,
    mock,
    mocked,
    needs_chromium,
    page,
    served,
    start_session,
    wait_for_frames,
)

__all__ = ["browser", "mock", "mocked", "page", "served"]  # fixtures used by name

FOLLOW_WAIT = 60_000
"""ms: the bound on waiting for the page to scroll to the end (a frame drawn under load)."""
SCROLL_LOG = """() => {
  window.__scrolls = [];
  const box = document.querySelector('#messages');
  box.addEventListener('scroll', () => window.__scrolls.push(
    [Math.round(performance.now()), box.scrollTop, box.scrollHeight, box.clientHeight]));
}"""
"""Records the transcript's scroll events (time, top, height, client height) for a failure's
message."""
pytestmark = needs_chromium

TO_ABORT = "word " * 2000
"""A prompt the echoing model streams back for some 17 s (12 characters a chunk, 20 ms apart):
aborted, it costs no time, and the abort lands while it streams however slow the machine is
(the 400 words used before streamed for 3 s, the test's budget to see it and press Esc)."""


def test_page_creates_a_session_streams_and_aborts(page: Any, served: Served) -> None:
    start_session(page, served)
    # The token left the address bar (it only travels in the fragment).
    assert "token" not in page.url
    page.fill("#prompt", "hello from the browser")
    page.click("#send")
    expect(page.locator(".msg.assistant .text").last).to_have_text("hello from the browser")
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator("#usage")).to_contain_text("tokens")
    # A long reply: abort it while it streams.
    page.fill("#prompt", TO_ABORT)
    page.click("#send")
    expect(page.locator("#status")).to_have_text("streaming")
    expect(page.locator(".msg.assistant.streaming .text")).to_have_count(1)
    page.click("#abort")
    expect(page.locator(".msg.assistant.error")).to_have_count(1)
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator(".msg.assistant.error")).to_contain_text("aborted", ignore_case=True)
    assert page.errors == []


def test_esc_aborts_and_an_aborted_first_reply_shows_no_zero_usage(
    page: Any, served: Served
) -> None:
    log_frames(page)
    start_session(page, served)
    page.fill("#prompt", TO_ABORT)
    page.press("#prompt", "Enter")
    expect(page.locator(".msg.assistant.streaming .text")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.locator(".msg.assistant.error")).to_contain_text("aborted", ignore_case=True)
    expect(page.locator("#status")).to_have_text("idle")
    # Whatever the faux model counted for the aborted reply (nothing, or its estimate), the
    # usage never reads "0 tokens": checked once the page has drawn the stats it asks for
    # when the run settles (before, the toolbar still shows the stats from before the run).
    wait_for_frames(page, event("agent_settled"), answer("get_session_stats"))
    expect(page.locator("#usage")).not_to_have_text(re.compile(r"^0 tokens"))
    # No token counted at all (a first reply aborted before the model reported usage): the
    # stats answer, drawn by the page's own renderer, shows nothing. Read in the same script
    # step as the render: the page's own stats request (sent when the run settled) may be
    # answered at any moment and would draw over it.
    drawn = page.evaluate(
        """async () => {
          const { renderUsage } = await import("/transcript.js");
          renderUsage({ tokens: { input: 0, output: 0, total: 0 }, cost: 0,
                        contextUsage: { tokens: 0, contextWindow: 128000, percent: 0 } });
          const usage = document.getElementById("usage");
          return [usage.dataset.tokens, usage.textContent];
        }"""
    )
    assert drawn == ["0", ""]


def test_shift_enter_is_a_new_line_and_the_queue_shows_steering_and_follow_up(
    page: Any, mocked: Served, mock: MockLLM
) -> None:
    # The run waits in a tool until the test creates the file `go`: what is queued meanwhile
    # stays queued, however long the test takes to look (a streamed reply gave it 3 s).
    wait = "while [ ! -e go ]; do sleep 0.02; done"
    mock.queue(
        {"kind": "tool_call", "name": "bash", "arguments": {"command": wait}},
        {"kind": "text", "text": "Steered."},
        {"kind": "text", "text": "Followed up."},
    )
    start_session(page, mocked)
    page.fill("#prompt", "first")
    page.press("#prompt", "Shift+Enter")
    page.keyboard.type("second")
    expect(page.locator("#prompt")).to_have_value("first\nsecond")
    expect(page.locator(".msg.user")).to_have_count(0)  # nothing sent yet
    page.fill("#prompt", "word " * 400)
    page.press("#prompt", "Enter")
    expect(page.locator("#status")).to_have_text("streaming")
    expect(page.locator("#send")).to_have_text("Steer")
    page.fill("#prompt", "steer me")
    page.press("#prompt", "Enter")
    page.fill("#prompt", "later please")
    page.click("#follow-up")
    queue = page.locator("#queue")
    expect(queue.locator(".queue-item")).to_have_count(2)
    expect(queue.locator(".queue-item.steer .queue-text")).to_have_text("steer me")
    expect(queue.locator(".queue-item.steer .queue-kind")).to_have_text("Steering")
    expect(queue.locator(".queue-item.follow-up .queue-text")).to_have_text("later please")
    expect(queue.locator(".queue-item.follow-up .queue-kind")).to_have_text("Follow-up")
    # Both are delivered in turn once the tool returns; the queue empties.
    (mocked.cwd / "go").touch()
    expect(page.locator(".msg.user .text")).to_have_text(
        [re.compile("^word"), "steer me", "later please"]
    )
    expect(queue).to_be_hidden()
    expect(page.locator("#status")).to_have_text("idle")


def test_the_transcript_follows_the_stream_unless_the_reader_scrolled_up(
    page: Any, served: Served
) -> None:
    page.set_viewport_size({"width": 900, "height": 500})
    start_session(page, served)
    # Every scroll event of the transcript, as the page's own handler sees it, so a wait that
    # fails says why (one CI run saw the first wait fail; no run since reproduced it).
    page.evaluate(SCROLL_LOG)
    page.fill("#prompt", "line of text\n" * 120)
    page.press("#prompt", "Enter")
    messages = page.locator("#messages")
    streaming = page.locator(".msg.assistant.streaming .md")
    expect(streaming).to_have_count(1)

    def grown_past(length: int) -> None:
        page.wait_for_function(
            "([n]) => (document.querySelector('.msg.assistant.streaming .md') || {textContent: ''})"
            ".textContent.length > n",
            arg=[length],
        )

    def reaches_the_end() -> None:
        # The page scrolls in the frame after it draws the text: wait for that frame (a page
        # that does not follow never gets there and the wait fails). Bounded as the page's
        # other waits are: a fresh-clone CI, with the differential's agents on both cores,
        # once drew no such frame within 5 s.
        try:
            page.wait_for_function(
                "() => { const b = document.querySelector('#messages');"
                " return b.scrollHeight - b.scrollTop - b.clientHeight < 40; }",
                timeout=FOLLOW_WAIT,
            )
        except PlaywrightTimeoutError:
            seen = page.evaluate(
                "() => { const b = document.querySelector('#messages');"
                " return {now: [b.scrollTop, b.scrollHeight, b.clientHeight],"
                " scrolls: window.__scrolls.slice(-20)}; }"
            )
            raise AssertionError(f"the page did not follow the stream to its end: {seen}") from None

    grown_past(200)
    reaches_the_end()  # following
    messages.evaluate("(b) => { b.scrollTop = 0; b.dispatchEvent(new Event('scroll')); }")
    grown_past(len(streaming.text_content() or "") + 200)
    assert messages.evaluate("(b) => b.scrollTop") == 0  # left where the reader is
    # Back to the end, its scroll event handled in the same step (as above): the browser's
    # own comes a frame later and, were the text to grow in between, judged the reader still
    # away from the end.
    messages.evaluate(
        "(b) => { b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); }"
    )
    expect(page.locator("#status")).to_have_text("idle")
    reaches_the_end()  # followed again to the end
