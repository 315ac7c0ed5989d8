"""The transcript keeps following the output when it grows between the page's own scroll and
that scroll's event (the event comes a frame later): only a reader's scroll stops it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.transports.browser import (
    ONE_PROCESS,
    Served,
    browser,
    needs_chromium,
    page,
    served,
    start_session,
)

__all__ = ["browser", "page", "served"]  # fixtures used by name
pytestmark = needs_chromium

LONG = 60_000
"""ms: a reply of the echoing faux model on a loaded machine (a bound, not a sleep)."""

DISTANCE = "b => b.scrollHeight - b.scrollTop - b.clientHeight"
"""How far the transcript is scrolled from its end, in pixels."""

READER_SCROLL = """async (box, top) => {
  // A reader's scroll: the position set, then two frames, so its scroll event has come
  // before anything else happens (the event of a scroll comes a frame later; arriving after
  // the transcript grew, it would find the reader away from the end they scrolled to).
  box.scrollTop = top === null ? box.scrollHeight : top;
  const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
  await frame();
  await frame();
}"""
"""Scroll the transcript as a reader does (``null``: to its end)."""

PROMPT_AND_START_TOGETHER = """
(() => {
  // Forces the order a loaded machine gives now and then: the prompt's own message and the
  // reply's message_start handled in one task, and nothing more until the page has drawn two
  // frames (the page's scroll has had its event). The session socket's frames from the
  // user's message_start to the assistant's are held, then handed to the page one after the
  // other; the frames after them are held for those two frames.
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      if (String(args[0]).includes("/v1/host")) return;
      const held = [];
      let holding = false;
      let done = false;
      const release = () => {
        for (const data of held.splice(0)) {
          const replay = new MessageEvent("message", { data });
          replay.released = true;
          this.dispatchEvent(replay);
        }
      };
      // Added before the page's own handler: it runs first and can stop the frame.
      this.addEventListener("message", (event) => {
        if (event.released || done) return;
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          return;
        }
        const role = frame.type === "message_start" ? frame.message.role : null;
        if (role === "user") holding = true;
        if (!holding) return;
        held.push(event.data);
        event.stopImmediatePropagation();
        if (role !== "assistant") return;
        done = true;
        window.__released = held.length;
        release();
        holding = true;
        done = false;
        requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => {
          done = true;
          release();
        })));
      });
    }
  };
})();
"""


@pytest.fixture
def daemon_options() -> tuple[str, ...]:
    """The daemons of ``served``: one process (checks of the page alone)."""
    return ONE_PROCESS


def test_a_reply_starting_in_the_prompts_task_is_followed_to_its_end(
    page: Any, served: Served
) -> None:
    page.set_viewport_size({"width": 900, "height": 500})
    page.add_init_script(PROMPT_AND_START_TOGETHER)
    start_session(page, served)
    # A prompt taller than the transcript: its own message scrolls the page, and the reply's
    # header is added before that scroll's event comes.
    page.fill("#prompt", "line of text\n" * 60)
    page.press("#prompt", "Enter")
    page.wait_for_function("() => window.__released >= 2", timeout=LONG)
    expect(page.locator("#status")).to_have_text("idle", timeout=LONG)
    expect(page.locator(".msg.assistant")).to_have_count(1, timeout=LONG)
    # The whole reply was drawn; a page that took its own scroll for the reader's stopped
    # at the prompt.
    assert page.locator("#messages").evaluate(DISTANCE) < 40
    assert page.errors == []


def test_growth_between_the_pages_scroll_and_its_event_does_not_stop_following(
    page: Any, served: Served
) -> None:
    page.set_viewport_size({"width": 900, "height": 500})
    start_session(page, served)
    # The page's own module (one instance per URL): its scroll, then the transcript growing
    # by more than the page's slack before that scroll's event, then the page's next scroll.
    distance = page.evaluate(
        """async () => {
          const dom = await import(new URL("/dom.js", location.href).href);
          const box = document.getElementById("messages");
          const block = (px) => {
            const node = document.createElement("div");
            node.style.height = px + "px";
            box.append(node);
          };
          const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
          block(2000);
          dom.scrollDown();
          await frame();
          await frame();
          block(100);
          dom.scrollDown();
          block(300);
          const events = [];
          box.addEventListener("scroll", () => events.push(box.scrollTop));
          await frame();
          await frame();
          if (events.length === 0) return "the page's scroll had no event";
          dom.scrollDown();
          return box.scrollHeight - box.scrollTop - box.clientHeight;
        }"""
    )
    assert distance == 0
    # A reader's scroll still stops it, and their scroll back to the end starts it again.
    box = page.locator("#messages")
    box.evaluate(READER_SCROLL, 100)
    box.evaluate(
        "b => b.append(Object.assign(document.createElement('div'), {style: 'height: 300px'}))"
    )
    page.evaluate("async () => (await import(new URL('/dom.js', location.href).href)).scrollDown()")
    assert box.evaluate("b => b.scrollTop") == 100
    box.evaluate(READER_SCROLL, None)
    box.evaluate(
        "b => b.append(Object.assign(document.createElement('div'), {style: 'height: 300px'}))"
    )
    page.evaluate("async () => (await import(new URL('/dom.js', location.href).href)).scrollDown()")
    assert box.evaluate(DISTANCE) == 0
    assert page.errors == []
