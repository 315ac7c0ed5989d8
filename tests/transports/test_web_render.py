"""Replies rendered on the page (system Chromium, a real ``pitrio serve``, the shared mock LLM):
markdown with highlighted code, sanitized (markup from a reply never runs script), streamed
text re-rendered per animation frame rather than per delta, thinking folded; images attached
by file input and by paste reach the model."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.transports.browser import (
    ONE_PROCESS,
    MockLLM,
    Served,
    browser,
    mock,
    mocked,
    needs_chromium,
    page,
    prompt,
    serve,
    start_session,
)

__all__ = ["browser", "mock", "mocked", "page"]  # fixtures used by name
pytestmark = needs_chromium


@pytest.fixture
def daemon_options() -> tuple[str, ...]:
    """The daemons of ``served`` and ``mocked``: one process (checks of the page alone)."""
    return ONE_PROCESS


HOSTILE = (
    "# Report\n\n**bold** and `inline`\n\n"
    '<img src="/nothing.png" onerror="window.__pwned = 1">\n\n'
    "<script>window.__pwned = 2</script>\n\n"
    "[click](javascript:window.__pwned=3) and [docs](https://example.invalid/)\n\n"
    "```python\ndef answer():\n    return 42\n```\n\n- one\n- two\n"
)

# Counts the text_delta frames the page receives and the DOM mutations of assistant text,
# installed before the page's own scripts run.
COUNTERS = """
(() => {
  window.__deltas = 0;
  window.__renders = 0;
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        if (typeof event.data === "string" && event.data.includes('"text_delta"')) {
          window.__deltas += 1;
        }
      });
    }
  };
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.target.nodeType === 1 && record.target.matches(".msg.assistant .text")) {
        window.__renders += 1;
      }
    }
  }).observe(document, { childList: true, subtree: true, characterData: true });
})();
"""


def test_markdown_is_rendered_highlighted_and_sanitized(
    page: Any, mocked: Served, mock: MockLLM
) -> None:
    mock.queue({"kind": "text", "text": HOSTILE, "deltas": 40})
    start_session(page, mocked)
    prompt(page, "report")
    reply = page.locator(".msg.assistant .md")
    expect(reply.locator("h1")).to_have_text("Report")
    expect(reply.locator("strong")).to_have_text("bold")
    expect(reply.locator("li")).to_have_text(["one", "two"])
    expect(reply.locator("pre code.hljs .hljs-keyword")).to_have_text(["def", "return"])
    # The checks below read once: on the reply as finally drawn (its streamed drawing is
    # replaced when it ends; "idle" may show before that), once its image failed to load (a
    # handler left on it would have run by then).
    expect(page.locator(".msg.assistant:not(.streaming) .md h1")).to_have_text("Report")
    page.wait_for_function("() => document.querySelector('.msg.assistant .md img').complete")
    expect(page.locator("#status")).to_have_text("idle")
    # The markup survived as inert elements only.
    assert reply.locator("img").count() == 1
    assert reply.locator("img").get_attribute("onerror") is None
    assert page.locator("#messages script, #messages [onerror]").count() == 0
    links = reply.locator("a")
    expect(links).to_have_count(2)
    assert links.nth(0).get_attribute("href") is None  # the javascript: URL was dropped
    assert links.nth(1).get_attribute("href") == "https://example.invalid/"
    assert links.nth(1).get_attribute("rel") == "noopener noreferrer"
    assert page.evaluate("() => window.__pwned") is None
    # The user's own text is shown as typed, never as markup.
    prompt(page, "<b>typed</b> **not bold**")
    expect(page.locator(".msg.user .text").last).to_have_text("<b>typed</b> **not bold**")
    assert page.locator(".msg.user b, .msg.user strong").count() == 0


def test_a_fast_stream_is_rendered_per_frame_not_per_delta(
    page: Any, mocked: Served, mock: MockLLM
) -> None:
    mock.queue({"kind": "text", "deltas": 400, "delta_text": "word "})
    page.add_init_script(COUNTERS)
    start_session(page, mocked)
    prompt(page, "stream")
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator(".msg.assistant .md")).to_have_text(("word " * 400).strip())
    deltas = page.evaluate("() => window.__deltas")
    renders = page.evaluate("() => window.__renders")
    assert deltas >= 100, deltas  # the daemon may merge a few; most arrive one by one
    assert renders < deltas / 2, (renders, deltas)


def test_thinking_is_folded_once_the_reply_is_complete(page: Any, tmp_path: Path) -> None:
    # The faux rules of pi's fixtures answer "THINK..." with a thinking block on faux-think.
    with serve(
        tmp_path,
        *ONE_PROCESS,
        "--model",
        "faux/faux-think",
        env={"PITRIO_FAUX_SCRIPT": "fixture-rules"},
    ) as daemon:
        start_session(page, daemon)
        prompt(page, "THINK: which way?")
        expect(page.locator(".msg.assistant .md")).to_have_text("Here is my considered answer.")
        expect(page.locator("#status")).to_have_text("idle")
        thinking = page.locator(".msg.assistant details.thinking")
        expect(thinking).to_have_count(1)
        expect(thinking).not_to_have_attribute("open", "")
        expect(thinking.locator(".thinking-text")).to_be_hidden()
        thinking.locator("summary").click()
        expect(thinking.locator(".thinking-text")).to_have_text(
            "The user asked: THINK: which way?. Consider it step by step."
        )


PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def captured_images(mock: MockLLM) -> list[str]:
    """The image URLs of every user message the mock received."""
    captured = httpx.get(f"http://127.0.0.1:{mock.port}/_mock/captured").json()
    urls = []
    for entry in captured:
        for message in entry["request"].get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                urls += [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    return urls


def test_images_from_the_file_input_and_from_paste_reach_the_model(
    page: Any, mocked: Served, mock: MockLLM, tmp_path: Path
) -> None:
    httpx.post(f"http://127.0.0.1:{mock.port}/_mock/config", json={"capture": True})
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    start_session(page, mocked)
    page.set_input_files("#image-input", str(image))
    expect(page.locator("#attachments img.thumb")).to_have_count(1)
    page.fill("#prompt", "what is this?")
    page.press("#prompt", "Enter")
    expect(page.locator("#attachments")).to_be_hidden()
    expect(page.locator(".msg.user img.attachment")).to_have_count(1)
    expect(page.locator("#status")).to_have_text("idle")
    expect(page.locator(".msg.assistant")).to_have_count(1)
    data = base64.b64encode(PNG).decode()
    assert captured_images(mock) == [f"data:image/png;base64,{data}"]
    # Pasted into the text box: a clipboard event carrying a file.
    page.evaluate(
        """(b64) => {
          const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
          const transfer = new DataTransfer();
          transfer.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
          const event = new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true,
            cancelable: true });
          document.getElementById("prompt").dispatchEvent(event);
        }""",
        data,
    )
    expect(page.locator("#attachments img.thumb")).to_have_count(1)
    page.locator("#attachments .remove").click()  # removed again: nothing is sent
    expect(page.locator("#attachments")).to_be_hidden()
    # A non-image is refused with a notice.
    text = tmp_path / "notes.txt"
    text.write_text("plain")
    page.set_input_files("#image-input", str(text))
    expect(page.locator("#notice.error")).to_contain_text("notes.txt is not an image")
