"""The page's run status follows the session's own socket while it is attached: the host
socket's ``session_idle`` may arrive before the session socket's last frames of the run."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.transports.browser import (
    Served,
    browser,
    needs_chromium,
    page,
    prompt,
    served,
    start_session,
)

__all__ = ["browser", "page", "served"]  # fixtures used by name
pytestmark = needs_chromium

LONG = 60_000
"""ms: a reply of the slowly streaming faux model on a loaded machine (a bound, not a sleep)."""

HOST_FIRST = """
(() => {
  // Forces the race: the session socket's frames from its ``agent_end`` on are held until the
  // host socket's ``session_idle`` of the run has been handled by the page; in the task after
  // that handling the status shown is recorded, then the held frames are handed on in order.
  const Native = window.WebSocket;
  const held = [];
  let session = null;
  let started = false;
  let holding = false;
  window.__statusAtHostIdle = undefined;
  const release = () => {
    window.__statusAtHostIdle = document.getElementById("status").textContent;
    holding = false;
    for (const data of held.splice(0)) {
      const replay = new MessageEvent("message", { data });
      replay.released = true;
      session.dispatchEvent(replay);
    }
  };
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const host = String(args[0]).includes("/v1/host");
      if (!host) session = this;
      // Added before the page's own handler: it runs first and can stop the frame.
      this.addEventListener("message", (event) => {
        if (event.released) return;
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          return;
        }
        const recorded = window.__statusAtHostIdle !== undefined;
        if (host) {
          if (frame.type === "session_idle" && started && !recorded) setTimeout(release, 0);
          return;
        }
        if (frame.type === "agent_start") started = true;
        if (!recorded && (holding || frame.type === "agent_end")) {
          holding = true;
          held.push(event.data);
          event.stopImmediatePropagation();
        }
      });
    }
  };
})();
"""


def test_the_hosts_idle_before_the_sessions_last_frames_leaves_the_run_streaming(
    page: Any, served: Served
) -> None:
    page.add_init_script(HOST_FIRST)
    start_session(page, served)
    prompt(page, "hello there")
    page.wait_for_function("() => window.__statusAtHostIdle !== undefined", timeout=LONG)
    # The run's end had not reached the page through its session: still streaming then.
    assert page.evaluate("window.__statusAtHostIdle") == "streaming"
    # Its own frames then settle it, and the reply is drawn.
    expect(page.locator("#status")).to_have_text("idle", timeout=LONG)
    expect(page.locator(".msg.assistant")).to_have_count(1, timeout=LONG)
    assert page.errors == []
