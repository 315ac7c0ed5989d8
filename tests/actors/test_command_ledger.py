"""The exactly-once command ledger (pure): new, in progress, answered; fingerprints; eviction;
and the stamps that carry a command's id in its entries."""

from __future__ import annotations

import orjson
import pytest

from pitrio.actors.session.command_ledger import (
    CommandLedger,
    Fresh,
    InProgress,
    Repeat,
    fingerprint,
)
from pitrio.actors.session_store.command_stamp import (
    STAMP_KEY,
    CommandStamp,
    read_stamps,
    stamped,
)
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.entries import ModelChangeEntry

PROMPT = {"id": "p1", "type": "prompt", "message": "hello"}
ANSWER = {"id": "p1", "type": "response", "command": "prompt", "success": True}


def test_a_new_id_is_applied_then_its_repeats_get_the_first_answer() -> None:
    ledger = CommandLedger()
    print_ = fingerprint(PROMPT)
    assert ledger.begin("p1", print_) == Fresh()
    assert ledger.begin("p1", print_) == InProgress()  # still being applied
    ledger.finish("p1", print_, ANSWER)
    assert ledger.begin("p1", print_) == Repeat(ANSWER)
    assert ledger.begin("p1", print_) == Repeat(ANSWER)  # any number of times
    assert ledger.begin("p2", print_) == Fresh()  # another id is another command


def test_the_fingerprint_ignores_the_id_and_key_order() -> None:
    same = {"message": "hello", "type": "prompt", "id": "other"}
    assert fingerprint(PROMPT) == fingerprint(same)
    assert fingerprint(PROMPT) != fingerprint({**PROMPT, "message": "hello!"})
    assert fingerprint(PROMPT) != fingerprint({**PROMPT, "type": "steer"})


def test_a_reused_id_with_other_fields_is_a_new_command() -> None:
    # pi gives ids no meaning beyond matching a response: a script sending every command as
    # "id": "1" must keep working.
    ledger = CommandLedger()
    first, second = fingerprint(PROMPT), fingerprint({**PROMPT, "message": "next"})
    ledger.begin("1", first)
    ledger.finish("1", first, ANSWER)
    assert ledger.begin("1", second) == Fresh()
    other = {**ANSWER, "data": {"disposition": "queued"}}
    ledger.finish("1", second, other)
    assert ledger.begin("1", second) == Repeat(other)
    assert ledger.begin("1", first) == Fresh()  # the id now names the second command


def test_a_refused_or_abandoned_command_is_forgotten() -> None:
    ledger = CommandLedger()
    print_ = fingerprint(PROMPT)
    ledger.begin("p1", print_)
    ledger.finish("p1", print_, {**ANSWER, "success": False, "error": "No model"})
    assert ledger.begin("p1", print_) == Fresh()  # it changed nothing: apply the repeat
    ledger.finish("p1", print_, None)  # cancelled before an answer
    assert ledger.begin("p1", print_) == Fresh()
    assert len(ledger) == 1


def test_answered_ids_are_bounded_least_recently_used_first() -> None:
    ledger = CommandLedger(capacity=3)
    for key in ("a", "b", "c"):
        ledger.begin(key, "f")
        ledger.finish(key, "f", {**ANSWER, "id": key})
    assert isinstance(ledger.begin("a", "f"), Repeat)  # "a" is now the most recent
    ledger.begin("d", "f")
    assert isinstance(ledger.begin("d", "f"), InProgress)
    ledger.finish("d", "f", {**ANSWER, "id": "d"})
    assert ledger.evicted == 1 and len(ledger) == 3
    assert ledger.begin("b", "f") == Fresh()  # the least recently used went
    assert isinstance(ledger.begin("a", "f"), Repeat)
    with pytest.raises(ValueError):
        CommandLedger(capacity=0)


def test_commands_in_progress_are_never_evicted() -> None:
    ledger = CommandLedger(capacity=1)
    ledger.begin("slow", "f")
    for key in ("a", "b", "c"):
        ledger.begin(key, "f")
        ledger.finish(key, "f", {**ANSWER, "id": key})
    assert ledger.begin("slow", "f") == InProgress()


def test_a_recorded_answer_seeds_the_ledger_but_not_over_a_running_command() -> None:
    ledger = CommandLedger()
    ledger.recorded("p1", "f", ANSWER)
    assert ledger.begin("p1", "f") == Repeat(ANSWER)
    ledger.begin("p2", "g")
    ledger.recorded("p2", "g", ANSWER)
    assert ledger.begin("p2", "g") == InProgress()


def test_a_stamp_is_an_extra_field_of_the_entry_and_read_back_from_lines() -> None:
    stamp = CommandStamp("req-7", "set_model", "0123456789abcdef")
    entry = ModelChangeEntry(
        id="e1", parent_id=None, timestamp="2026-01-01T00:00:00.000Z", provider="p", model_id="m"
    )
    line = orjson.dumps(to_json(stamped(entry, stamp)))
    value = orjson.loads(line)
    assert value[STAMP_KEY] == {"id": "req-7", "command": "set_model", "fp": "0123456789abcdef"}
    assert from_json(value, ModelChangeEntry).model_id == "m"  # pitrio still reads it
    # The first command that produced an entry names it.
    again = stamped(stamped(entry, stamp), CommandStamp("other", "prompt", "f"))
    assert to_json(again)[STAMP_KEY]["id"] == "req-7"
    unstamped = orjson.dumps(to_json(entry))
    junk = b'{"type":"custom","pitrioCommand":{"id":3}}'
    assert read_stamps([unstamped, line, junk, b'{"pitrioCommand" broken', line]) == [stamp]
