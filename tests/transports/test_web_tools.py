"""Tool calls on the page (system Chromium, a real ``pitrio serve``, the shared mock LLM as the
model): a collapsible card per call with its arguments, live output, result or error; the
output shown once; an edit's diff."""

from __future__ import annotations

from typing import Any

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
    start_session,
)

__all__ = ["browser", "mock", "mocked", "page"]  # fixtures used by name
pytestmark = needs_chromium


@pytest.fixture
def daemon_options() -> tuple[str, ...]:
    """The daemons of ``served`` and ``mocked``: one process (checks of the page alone)."""
    return ONE_PROCESS


FINAL = {"kind": "text", "text": "All done.", "deltas": 3}


def test_a_tool_call_is_one_card_with_live_output_then_its_result(
    page: Any, mocked: Served, mock: MockLLM
) -> None:
    # The command prints, then waits for a file the test creates once the first line is on
    # the page: the live output is seen while the tool still runs.
    # (The printed words are computed, so only the output, not the command, contains them.)
    command = 'echo "first-$((1))"; while [ ! -e go ]; do sleep 0.02; done; echo "second-$((2))"'
    mock.queue({"kind": "tool_call", "name": "bash", "arguments": {"command": command}}, FINAL)
    start_session(page, mocked)
    prompt(page, "run it")
    card = page.locator("details.tool")
    expect(card).to_have_count(1)
    expect(card.locator(".tool-name")).to_have_text("bash")
    expect(card.locator(".tool-args")).to_have_text(command)
    expect(card).to_have_class("tool running")
    expect(card.locator(".tool-output")).to_have_text("first-1")
    assert card.get_attribute("open") is not None  # open while it runs
    (mocked.cwd / "go").touch()
    expect(card).to_have_class("tool done")
    expect(card.locator(".tool-output")).to_have_text("first-1\nsecond-2")
    expect(page.locator(".msg.assistant .text").last).to_have_text("All done.")
    expect(page.locator("#status")).to_have_text("idle")
    # Shown once: no separate tool-result message repeats the output.
    assert page.locator("#messages").inner_text().count("second-2") == 1
    expect(page.locator(".msg.toolResult")).to_have_count(0)
    # The card folds and unfolds.
    card.locator("summary").click()
    expect(card).not_to_have_attribute("open", "")
    card.locator("summary").click()
    expect(card).to_have_attribute("open", "")
    # Reloaded from the session's messages: the same single card, with its result.
    page.reload()
    expect(page.locator("#host-status.on")).to_be_visible()
    page.locator("#sessions li").first.click()
    expect(page.locator("details.tool.done .tool-output")).to_have_text("first-1\nsecond-2")
    expect(page.locator("details.tool")).to_have_count(1)
    expect(page.locator(".msg.toolResult")).to_have_count(0)
    assert page.errors == []


def test_a_failing_tool_shows_its_error_state(page: Any, mocked: Served, mock: MockLLM) -> None:
    mock.queue(
        {"kind": "tool_call", "name": "bash", "arguments": {"command": "echo oops >&2; exit 3"}},
        FINAL,
    )
    start_session(page, mocked)
    prompt(page, "fail")
    card = page.locator("details.tool")
    expect(card).to_have_class("tool failed")
    expect(card.locator(".tool-state")).to_have_text("error")
    expect(card.locator(".tool-output")).to_contain_text("oops")
    expect(card.locator(".tool-output")).to_contain_text("3")
    assert card.get_attribute("open") is not None  # a failure stays in view
    expect(page.locator("#status")).to_have_text("idle")


def test_an_edit_shows_its_diff(page: Any, mocked: Served, mock: MockLLM) -> None:
    (mocked.cwd / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    edit = {"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}
    mock.queue({"kind": "tool_call", "name": "edit", "arguments": edit}, FINAL)
    start_session(page, mocked)
    prompt(page, "edit it")
    card = page.locator("details.tool.done")
    expect(card).to_have_count(1)
    expect(card.locator(".tool-args")).to_have_text("notes.txt (1 edit)")
    expect(card.locator(".diff .diff-del")).to_have_count(1)
    expect(card.locator(".diff .diff-del")).to_contain_text("beta")
    expect(card.locator(".diff .diff-add")).to_contain_text("BETA")
    expect(card.locator(".diff .diff-ctx").first).to_contain_text("alpha")
    assert (mocked.cwd / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"
