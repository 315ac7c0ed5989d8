"""Extension dialogs on the page (system Chromium, a real ``pitrio serve``): the permission
gate before ``rm`` approved and denied, each dialog kind answered, a countdown that closes its
dialog, a dialog answered in another window closing here, notify as a toast."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.shared_dir import ROOT
from tests.transports.browser import (
    MOCK_SETTINGS,
    ONE_PROCESS,
    MockLLM,
    Served,
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

GATE = ROOT / "examples" / "extensions" / "permission_gate.py"
ASK = """
async def ask(args, ctx):
    colour = await ctx.ui.select("Colour?", ["red", "blue"])
    name = await ctx.ui.input("Name?", "your name")
    notes = await ctx.ui.editor("Notes", "prefilled")
    sure = await ctx.ui.confirm("Sure?", "Really sure?")
    await ctx.ui.notify(f"got {colour} {name} {notes} {sure}", "warning")

async def quick(args, ctx):
    value = await ctx.ui.select("Quick?", ["a", "b"], time_limit=1.5)
    await ctx.ui.notify(f"quick answer {value}")

def setup(api):
    api.register_command("ask", ask, description="Ask four questions")
    api.register_command("quick", quick, description="A question with a time limit")
"""

# Every countdown text a dialog showed, in order: the quick dialog shows for 1.5 s only, short
# enough for a check polling at expect's intervals to miss it on a loaded machine.
COUNTDOWNS = """(box) =>
  [...box.querySelectorAll(".dialog .dialog-countdown")].map((node) => node.textContent)"""


@pytest.fixture
def daemon_options() -> tuple[str, ...]:
    """One daemon process for the checks of a dialog on one page; the default (a worker per
    core) for those where another page's connection or a reload has the acceptor route it
    (``parametrize("daemon_options", [()])``)."""
    return ONE_PROCESS


@pytest.fixture
def daemon(tmp_path: Path, mock: MockLLM, daemon_options: tuple[str, ...]) -> Iterator[Served]:
    ask = tmp_path / "ask.py"
    ask.write_text(ASK)
    with serve(
        tmp_path,
        *daemon_options,
        models=mock.models(),
        settings=MOCK_SETTINGS,
        extensions=[GATE, ask],
    ) as served:
        yield served


@pytest.mark.parametrize("choice", ["Allow", "Deny"])
def test_the_permission_gate_is_answered_from_the_page(
    page: Any, daemon: Served, mock: MockLLM, choice: str
) -> None:
    victim = daemon.cwd / "victim.txt"
    victim.write_text("precious")
    command = "rm victim.txt"
    mock.queue(
        {"kind": "tool_call", "name": "bash", "arguments": {"command": command}},
        {"kind": "text", "text": "Finished."},
    )
    start_session(page, daemon)
    prompt(page, "clean up")
    dialog = page.locator(".dialog.confirm")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".dialog-title")).to_have_text("Allow rm?")
    expect(dialog.locator(".dialog-message")).to_have_text(f"The agent wants to run: {command}")
    assert victim.exists()  # nothing ran while the question waits
    dialog.get_by_role("button", name=choice).click()
    expect(page.locator(".dialog")).to_have_count(0)
    expect(page.locator(".msg.assistant .text").last).to_have_text("Finished.")
    card = page.locator("details.tool")
    if choice == "Allow":
        expect(card).to_have_class("tool done")
        assert not victim.exists()
    else:
        expect(card).to_have_class("tool failed")
        expect(card.locator(".tool-output")).to_contain_text("refused")
        assert victim.read_text() == "precious"


def test_each_dialog_kind_is_answered_and_notify_is_a_toast(page: Any, daemon: Served) -> None:
    start_session(page, daemon)
    prompt(page, "/ask")
    select = page.locator(".dialog.select")
    expect(select.locator(".dialog-title")).to_have_text("Colour?")
    select.get_by_role("button", name="blue").click()
    field = page.locator(".dialog.input input")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("placeholder", "your name")
    field.fill("Ada")
    field.press("Enter")
    editor = page.locator(".dialog.editor textarea")
    expect(editor).to_have_value("prefilled")
    editor.fill("line one")
    page.locator(".dialog.editor").get_by_role("button", name="OK").click()
    # Esc cancels a dialog (and does not abort anything): the confirm answers its default.
    expect(page.locator(".dialog.confirm")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator(".dialog")).to_have_count(0)
    toast = page.locator(".toast.warning")
    expect(toast).to_have_text("got blue Ada line one False")


def test_a_countdown_closes_its_dialog_when_the_time_runs_out(page: Any, daemon: Served) -> None:
    record_values(page, "__countdowns", "dialogs", COUNTDOWNS)
    start_session(page, daemon)
    prompt(page, "/quick")
    dialog = page.locator(".dialog.select")
    page.wait_for_function("() => window.__countdowns.length > 0")
    expect(dialog).to_have_count(0)  # closed by the page, unanswered
    expect(page.locator(".toast")).to_have_text("quick answer None")
    countdowns = page.evaluate("() => window.__countdowns")
    assert re.match(r"^Closes in [12] s$", countdowns[0]), countdowns


@pytest.mark.parametrize("daemon_options", [()], ids=["workers"])
def test_a_dialog_answered_in_another_window_closes(
    browser: Any, page: Any, daemon: Served
) -> None:
    start_session(page, daemon)
    other_context = browser.new_context()
    try:
        other = other_context.new_page()
        other.goto(daemon.page_url)
        expect(other.locator("#sessions li")).to_have_count(1)
        other.locator("#sessions li").first.click()
        expect(other.locator("body[data-connected]")).to_have_count(1)
        prompt(page, "/ask")  # its dialogs have no time limit: only an answer closes them
        expect(page.locator(".dialog.select")).to_be_visible()
        expect(other.locator(".dialog.select")).to_be_visible()
        other.locator(".dialog.select").get_by_role("button", name="red").click()
        # The next question reaches both; the answered one is gone from both.
        expect(page.locator(".dialog.input")).to_be_visible()
        expect(page.locator(".dialog.select")).to_have_count(0)
        expect(other.locator(".dialog.select")).to_have_count(0)
        page.locator(".dialog.input input").fill("Bo")
        page.locator(".dialog.input input").press("Enter")
        expect(other.locator(".dialog.input")).to_have_count(0)
        expect(other.locator(".dialog.editor")).to_be_visible()
    finally:
        other_context.close()


@pytest.mark.parametrize("daemon_options", [()], ids=["workers"])
def test_a_page_reloaded_while_a_dialog_waits_is_shown_it_again(
    page: Any, daemon: Served, mock: MockLLM
) -> None:
    victim = daemon.cwd / "victim.txt"
    victim.write_text("precious")
    mock.queue(
        {"kind": "tool_call", "name": "bash", "arguments": {"command": "rm victim.txt"}},
        {"kind": "text", "text": "Finished."},
    )
    start_session(page, daemon)
    prompt(page, "clean up")
    expect(page.locator(".dialog.confirm")).to_be_visible()
    page.reload()
    expect(page.locator("#host-status.on")).to_be_visible()
    page.locator("#sessions li").first.click()
    dialog = page.locator(".dialog.confirm")
    expect(dialog.locator(".dialog-title")).to_have_text("Allow rm?")
    dialog.get_by_role("button", name="Allow").click()
    expect(page.locator(".msg.assistant .text").last).to_have_text("Finished.")
    assert not victim.exists()
    # Answered: a page attaching now is not asked again.
    page.reload()
    expect(page.locator("#host-status.on")).to_be_visible()
    page.locator("#sessions li").first.click()
    expect(page.locator("body[data-connected]")).to_have_count(1)
    expect(page.locator(".msg.assistant .text").last).to_have_text("Finished.")
    expect(page.locator(".dialog")).to_have_count(0)
