"""Extension dialogs in ``pitrio attach`` alone: questions, answers, time limits, order."""

from __future__ import annotations

from typing import Any

from pitrio.transports.attach_dialogs import Dialogs
from pitrio.transports.attach_render import Style


def request(method: str, dialog_id: str = "d1", **fields: Any) -> dict[str, Any]:
    return {"type": "extension_ui_request", "id": dialog_id, "method": method, **fields}


def reply(dialog_id: str = "d1", **fields: Any) -> dict[str, Any]:
    return {"type": "extension_ui_response", "id": dialog_id, **fields}


def test_confirm_takes_yes_or_no_and_asks_again_otherwise() -> None:
    dialogs = Dialogs(Style())
    asked = dialogs.offer(request("confirm", title="Allow rm?", message="rm -rf x"), now=0)
    assert asked == "? Allow rm?\n  rm -rf x\n  [y/n] "
    assert dialogs.answer("maybe") == (None, "  answer y or n: ")
    assert dialogs.answer(" YES ") == (reply(confirmed=True), "")
    assert dialogs.current is None
    dialogs.offer(request("confirm", "d2", title="Again?"), now=0)
    assert dialogs.answer("n") == (reply("d2", confirmed=False), "")


def test_select_by_number_or_by_text() -> None:
    dialogs = Dialogs(Style())
    asked = dialogs.offer(request("select", title="Colour?", options=["red", "blue"]), now=0)
    assert asked == "? Colour?\n  1) red\n  2) blue\n  choose 1-2: "
    assert dialogs.answer("0") == (None, "  choose a number from 1 to 2: ")
    assert dialogs.answer("Blue") == (reply(value="blue"), "")
    dialogs.offer(request("select", "d2", title="Colour?", options=["red", "blue"]), now=0)
    assert dialogs.answer("1") == (reply("d2", value="red"), "")


def test_input_takes_the_line_as_typed() -> None:
    dialogs = Dialogs(Style())
    asked = dialogs.offer(request("input", title="Name?", placeholder="your name"), now=0)
    assert asked == "? Name?\n  answer (your name): "
    assert dialogs.answer("  Ada  ") == (reply(value="  Ada  "), "")


def test_editor_reads_lines_up_to_a_dot() -> None:
    dialogs = Dialogs(Style())
    asked = dialogs.offer(request("editor", title="Notes?", prefill="draft\nmore"), now=0)
    assert asked.startswith("? Notes?\n  | draft\n  | more\n  type the text")
    assert dialogs.answer("one") == (None, "")
    assert dialogs.answer("") == (None, "")
    assert dialogs.answer("three") == (None, "")
    assert dialogs.answer(".") == (reply(value="one\n\nthree"), "")


def test_editor_dot_at_once_keeps_the_prefill() -> None:
    dialogs = Dialogs(Style())
    dialogs.offer(request("editor", title="Notes?", prefill="draft"), now=0)
    assert dialogs.answer(".") == (reply(value="draft"), "")


def test_an_external_editor_answers_the_editor_dialog() -> None:
    dialogs = Dialogs(Style(), external_editor=True)
    asked = dialogs.offer(request("editor", title="Notes?"), now=0)
    assert "opening $EDITOR" in asked and dialogs.wants_editor()
    assert dialogs.edited("typed\n") == (reply(value="typed"), "")
    dialogs.offer(request("editor", "d2", title="Notes?"), now=0)
    sent, told = dialogs.edited(None)
    assert sent == reply("d2", cancelled=True) and "the editor failed" in told
    dialogs.offer(request("confirm", "d3", title="Sure?"), now=0)
    assert not dialogs.wants_editor()


def test_one_question_at_a_time_in_order_of_arrival() -> None:
    dialogs = Dialogs(Style())
    assert dialogs.offer(request("confirm", "a", title="First?"), now=0).startswith("? First?")
    assert dialogs.offer(request("input", "b", title="Second?"), now=0) == ""
    sent, told = dialogs.answer("y")
    assert sent == reply("a", confirmed=True)
    assert told == "? Second?\n  answer: "
    assert dialogs.answer("x") == (reply("b", value="x"), "")


def test_a_dialog_seen_before_is_not_asked_again() -> None:
    """A resumed connection replays the frames since the last seq seen: maybe the request."""
    dialogs = Dialogs(Style())
    dialogs.offer(request("confirm", "a", title="First?"), now=0)
    dialogs.answer("y")
    assert dialogs.offer(request("confirm", "a", title="First?"), now=5) == ""
    assert dialogs.current is None


def test_not_dialogs_are_ignored() -> None:
    dialogs = Dialogs(Style())
    for method in ("notify", "setStatus", "setWidget", "setTitle", "set_editor_text"):
        assert dialogs.offer(request(method, method, title="x"), now=0) == ""
    assert dialogs.current is None


def test_the_time_limit_closes_a_dialog_and_says_so() -> None:
    dialogs = Dialogs(Style())
    asked = dialogs.offer(request("confirm", "a", title="Quick?", timeout=2000), now=10.0)
    assert asked.startswith("? Quick? (answer within 2 s)\n")
    dialogs.offer(request("input", "b", title="Then?"), now=10.5)
    assert dialogs.next_deadline() == 12.0
    assert dialogs.expire(11.9) == ""
    told = dialogs.expire(12.0)
    assert told == "\n(no answer within 2 s: “Quick?” was cancelled)\n? Then?\n  answer: "
    assert dialogs.current is not None and dialogs.current.id == "b"
    assert dialogs.next_deadline() is None


def test_a_queued_dialog_can_time_out_behind_the_open_one() -> None:
    dialogs = Dialogs(Style())
    dialogs.offer(request("confirm", "a", title="Open?"), now=0)
    dialogs.offer(request("select", "b", title="Queued?", options=["x"], timeout=500), now=0)
    assert dialogs.expire(1.0) == "(no answer within 0.5 s: “Queued?” was cancelled)\n"
    assert dialogs.answer("y") == (reply("a", confirmed=True), "")


def test_cancel_replies_cancelled_and_asks_the_next() -> None:
    dialogs = Dialogs(Style())
    dialogs.offer(request("confirm", "a", title="First?"), now=0)
    dialogs.offer(request("input", "b", title="Second?"), now=0)
    sent, told = dialogs.cancel()
    assert sent == reply("a", cancelled=True)
    assert told == "\n(cancelled: First?)\n? Second?\n  answer: "
    assert dialogs.cancel()[0] == reply("b", cancelled=True)
    assert dialogs.cancel() == (None, "")
    assert dialogs.answer("late") == (None, "")


def test_a_dialog_answered_by_another_client_closes_here() -> None:
    dialogs = Dialogs(Style())
    dialogs.offer(request("confirm", "d1", title="Allow rm?"), now=0)
    dialogs.offer(request("input", "d2", title="Name?"), now=0)
    told = dialogs.answered_elsewhere("d1")
    # Closed with a note, and the next one is asked.
    assert told == "\n(answered elsewhere: “Allow rm?”)\n? Name?\n  answer: "
    assert dialogs.current is not None and dialogs.current.id == "d2"
    # Its own answer comes back as a notice too: nothing left to close, nothing said.
    dialogs.answer("Ada")
    assert dialogs.answered_elsewhere("d2") == ""
    assert dialogs.current is None


def test_a_queued_dialog_answered_elsewhere_leaves_the_open_one_alone() -> None:
    dialogs = Dialogs(Style())
    dialogs.offer(request("confirm", "d1", title="First?"), now=0)
    dialogs.offer(request("confirm", "d2", title="Second?"), now=0)
    assert dialogs.answered_elsewhere("d2") == "(answered elsewhere: “Second?”)\n"
    assert dialogs.current is not None and dialogs.current.id == "d1"
    assert dialogs.answer("y")[1] == ""  # nothing queued behind it any more
