"""The open extension dialogs of a hosted session (pure bookkeeping)."""

from __future__ import annotations

import orjson

from pitrio.actors.host.dialogs import OpenDialogs
from pitrio.messages.codec import to_json
from pitrio.messages.events import ExtensionUiRequest


def frame(event: ExtensionUiRequest, seq: int) -> bytes:
    return orjson.dumps({**to_json(event), "seq": seq})


def test_a_dialog_stays_open_until_answered_and_fire_and_forget_calls_are_not_kept() -> None:
    dialogs = OpenDialogs()
    ask = ExtensionUiRequest(id="d1", method="confirm", title="Allow rm?", message="rm x")
    note = ExtensionUiRequest(id="n1", method="notify", message="hello")
    dialogs.asked(ask, frame(ask, 7), now=100.0)
    dialogs.asked(note, frame(note, 8), now=100.0)
    assert dialogs.still_open(now=5000.0) == [{**to_json(ask), "seq": 7}]
    dialogs.answered("unknown")
    assert len(dialogs) == 1
    dialogs.answered("d1")
    assert dialogs.still_open(now=5000.0) == []


def test_a_time_limit_is_cut_to_what_is_left_then_the_dialog_is_forgotten() -> None:
    dialogs = OpenDialogs()
    ask = ExtensionUiRequest(id="q", method="select", title="Quick?", options=("a",), timeout=3000)
    editor = ExtensionUiRequest(id="e", method="editor", title="Notes")
    dialogs.asked(ask, frame(ask, 1), now=10.0)
    dialogs.asked(editor, frame(editor, 2), now=10.0)
    left = dialogs.still_open(now=11.25)
    assert [(f["id"], f.get("timeout")) for f in left] == [("q", 1750), ("e", None)]
    assert [f["id"] for f in dialogs.still_open(now=13.0)] == ["e"]  # q ran out
    assert len(dialogs) == 1
    dialogs.clear()
    assert dialogs.still_open(now=13.0) == []
