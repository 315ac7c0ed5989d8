"""Run notices on the page (system Chromium, a real ``pitrio serve``, the shared mock LLM): an
automatic retry after a 500 with its countdown and outcome, a retry that gives up, and a
compaction with its outcome."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.transports.browser import (
    MOCK_SETTINGS,
    ONE_PROCESS,
    MockLLM,
    browser,
    mock,
    needs_chromium,
    page,
    prompt,
    record_values,
    serve,
    start_session,
)

__all__ = ["browser", "mock", "page"]  # fixtures used by name
pytestmark = needs_chromium

ERROR = {"kind": "error", "preset": "server_error"}
# The provider's own retries off, so each 500 reaches the session's retry logic at once.
NO_PROVIDER_RETRY = {"retry": {"provider": {"maxRetries": 0}}}
# Every text the run notice showed, in order (however briefly it showed it).
NOTICE_TEXTS = """(box) => {
  const text = box.querySelector(".run-text");
  return text ? [text.textContent] : [];
}"""

# Every state of the run notice (its class, text, reason and buttons), in order: the retry's
# countdown shows for two seconds only, too short for checks polling one after the other.
NOTICE_STATES = """(box) => {
  const text = box.querySelector(".run-text");
  const reason = box.querySelector(".run-reason");
  return [{
    className: box.className,
    text: text ? text.textContent : null,
    reason: reason ? reason.textContent : null,
    buttons: [...box.querySelectorAll("button")].map((button) => button.textContent),
  }];
}"""


def test_a_retry_after_a_500_shows_its_countdown_and_success(
    page: Any, mock: MockLLM, tmp_path: Path
) -> None:
    settings = {**MOCK_SETTINGS, **NO_PROVIDER_RETRY}
    mock.queue(ERROR, {"kind": "text", "text": "Recovered.", "deltas": 2})
    record_values(page, "__states", "run-notice", NOTICE_STATES)
    with serve(tmp_path, *ONE_PROCESS, models=mock.models(), settings=settings) as daemon:
        start_session(page, daemon)
        prompt(page, "hello")
        page.wait_for_function(
            "() => window.__states.some((s) => s.text === 'Retry succeeded (attempt 1)')"
        )
        states = page.evaluate("() => window.__states")
        retrying = [s for s in states if s["className"] == "run-notice retry"]
        assert retrying, states
        # The default first delay is 2 s: the countdown shows 2 s or 1 s left, attempt 1 of 3,
        # with the reason and a way to cancel, all at once.
        assert re.match(r"^Retrying in [12] s \(attempt 1/3\)$", retrying[0]["text"]), states
        assert "500" in retrying[0]["reason"], states
        assert retrying[0]["buttons"] == ["Cancel retry"], states
        succeeded = [s for s in states if s["text"] == "Retry succeeded (attempt 1)"]
        assert succeeded[0]["className"] == "run-notice retry ok", states
        expect(page.locator(".msg.assistant .md").last).to_have_text("Recovered.")
        expect(page.locator("#status")).to_have_text("idle")


def test_a_retry_that_gives_up_says_so(page: Any, mock: MockLLM, tmp_path: Path) -> None:
    settings = {
        **MOCK_SETTINGS,
        "retry": {"maxRetries": 1, "baseDelayMs": 50, "provider": {"maxRetries": 0}},
    }
    mock.queue(ERROR, ERROR)
    with serve(tmp_path, *ONE_PROCESS, models=mock.models(), settings=settings) as daemon:
        start_session(page, daemon)
        prompt(page, "hello")
        failed = page.locator("#run-notice.failed")
        expect(failed.locator(".run-text")).to_have_text("Retry failed after 1 attempt")
        expect(failed.locator(".run-reason")).to_contain_text("500")
        expect(page.locator("#status")).to_have_text("idle")


def test_compaction_shows_that_it_runs_and_its_outcome(
    page: Any, mock: MockLLM, tmp_path: Path
) -> None:
    record_values(page, "__notices", "run-notice", NOTICE_TEXTS)
    # Keep little, so the first exchange is summarized: pi 1.6.0 refuses to compact a branch
    # that fits the kept budget ("Nothing to compact"; its system message is no history).
    settings = {**MOCK_SETTINGS, "compaction": {"keepRecentTokens": 100}}
    with serve(tmp_path, *ONE_PROCESS, models=mock.models(), settings=settings) as daemon:
        start_session(page, daemon)
        for text in ("first question", "second question"):
            mock.queue({"kind": "text", "text": f"answer to {text} " * 20})
            prompt(page, text)
            expect(page.locator(".msg.assistant .md").last).to_contain_text(f"answer to {text}")
            expect(page.locator("#status")).to_have_text("idle")
        mock.queue({"kind": "text", "text": "Summary of it all."})
        page.click("#compact")
        expect(page.locator("#run-notice.ok .run-text")).to_have_text(
            re.compile(r"^Context compacted \(\d+ tokens before\)$")
        )
        history = page.evaluate("() => window.__notices")
        assert history[0] == "Compacting the context (on request)…", history
        assert history[-1].startswith("Context compacted"), history
