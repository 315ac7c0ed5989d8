"""A session file read from a child's offer is the file read in-process
(pitrio/actors/session_store/preparsed.py, pitrio/_preparse.py; issue 38).

Every case starts the child the launcher starts, then reads the file through the store's
``read_session`` (which takes the offer) and again in-process, and compares all of it: the
entries (class, envelope, line, bytes, the message's text as ``get_messages`` cuts it and
its JSON, shared parent ids, decoded forms), the tree's index as the parser made it, the
problems, the header, the torn lines and the mark. A line the child certified stays in its
memory (``MappedMessageEntry``) and is compared as the ``TailMessageEntry`` the in-process
read makes, through what either gives. The files: the fuzz suite's mutations, each seed's,
and a clean long one, with the child's blocks as small as a few bytes (lines cut between
them).
"""

from __future__ import annotations

import json
import os
import random
import select
from array import array
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio import _preparse as preparse
from pitrio.actors.session_store import storage
from pitrio.actors.session_store.file_format import ParsedSession
from pitrio.actors.session_store.preparsed import CheckedParser, read_offered
from pitrio.actors.session_store.storage import read_session
from pitrio.actors.session_store.stored import (
    MappedMessageEntry,
    StoredEntry,
    TailMessageEntry,
)
from pitrio.errors import PitrioError
from pitrio.messages import entries
from tests.actors.test_session_store_fuzz import MUTATIONS, base_lines, join

HEADER_LINE = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}'


def kind(stored: StoredEntry) -> type[StoredEntry]:
    """An entry's class, a line left in the child's memory counted as the one read here."""
    return TailMessageEntry if type(stored) is MappedMessageEntry else type(stored)


def decoded(stored: StoredEntry) -> Any:
    """A message entry's message as the context decodes it, or why it does not decode."""
    if stored.type != "message":
        return None
    try:
        return stored.message()
    except PitrioError as exc:
        return repr(exc)


def summary(parsed: ParsedSession | None) -> Any:
    assert parsed is not None
    ids = {id(stored.id) for stored in parsed.entries}
    entries = [
        (
            kind(stored),
            stored.type,
            stored.id,
            stored.parent_id,
            id(stored.parent_id) in ids,  # a parentId is its parent's id object
            stored.raw,
            stored.role,
            stored.line,
            stored.origin,
            stored.timestamp,
            stored.message_bytes(),
            stored.message_json() if stored.type == "message" else None,
            decoded(stored),
            stored.entry() if stored.decoded else None,
        )
        for stored in parsed.entries
    ]
    index = parsed.index
    at = {id(stored): number for number, stored in enumerate(parsed.entries)}
    indexed = None
    if index is not None:  # the tree's index as the parser made it, by entry positions
        by_id = {entry_id: at[id(stored)] for entry_id, stored in index.by_id.items()}
        indexed = (by_id, index.chain, [at[id(stored)] for stored in index.noted])
    return (
        entries,
        parsed.problems,
        parsed.header,
        parsed.header_raw,
        parsed.ends_clean,
        parsed.migrated,
        parsed.version,
        parsed.empty,
        parsed.torn,
        parsed.mark,
        indexed,
    )


def is_memory_file(fd: int) -> bool:
    try:
        return "pitrio-preparse" in os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False


def same_new_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """A version 1 file's entries get new ids when read: the same ones at every read."""
    numbers = iter(range(10**6))
    monkeypatch.setattr(entries.secrets, "token_hex", lambda size: f"{next(numbers):0{2 * size}x}")


def offered_and_in_process(
    path: Path, monkeypatch: pytest.MonkeyPatch, classes: list[type] | None = None
) -> tuple[Any, Any]:
    """The summaries of the file read from a finished child's offer and read in-process;
    ``classes``, if given, gets the offered entries' own classes."""
    assert preparse.start(str(path), requests=False)  # it exits once its records are written
    offer = preparse._OFFERS[-1]
    watch = os.pidfd_open(offer.pid)
    try:  # the child finished: everything read comes from its records
        assert select.select([watch], [], [], 30)[0], "the child did not finish"
    finally:
        os.close(watch)
    same_new_ids(monkeypatch)
    taken: list[object] = []

    def spy(*args: Any) -> Any:
        taken.append(read_offered(*args))
        return taken[-1]

    with monkeypatch.context() as patched:
        patched.setattr(storage, "read_offered", spy)
        offered = read_session(path)
    assert taken and taken[0] is not None  # read from the offer, not in-process
    assert offer.covered == path.stat().st_size
    assert not preparse._OFFERS  # taken
    assert not is_memory_file(offer.memory)  # closed
    assert offered is not None
    if classes is not None:
        classes.extend(type(stored) for stored in offered.entries)
    same_new_ids(monkeypatch)
    return summary(offered), summary(read_session(path))


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutated_files_read_the_same_from_an_offer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutation: str
) -> None:
    for seed in range(4):
        rng = random.Random(f"{mutation}/{seed}")
        path = tmp_path / f"{mutation}{seed}.jsonl"
        path.write_bytes(MUTATIONS[mutation](rng, base_lines(rng)))
        offered, in_process = offered_and_in_process(path, monkeypatch)
        assert offered == in_process, (mutation, seed)


@pytest.mark.parametrize("block", [1, 7, 64, 4096])
def test_lines_cut_between_the_childs_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(preparse, "BLOCK", block)
    rng = random.Random(f"blocks/{block}")
    lines = base_lines(rng)
    # A message not last (built by read(), not inline), then a repeated line (a duplicate),
    # then pi's line spaced otherwise and with a space after it: certified, but its message
    # is not where get_messages cuts it (parsed out of the line, as in-process).
    odd = dict(orjson.loads(lines[2]), id="odd0", zz=1)
    spaced = json.dumps(dict(orjson.loads(lines[2]), id="sp0"), separators=(", ", ": "))
    after = orjson.dumps(dict(orjson.loads(lines[2]), id="sp1")) + b" "
    tail = [b"", b"garbage", orjson.dumps(odd), lines[3], spaced.encode(), after, b"  "]
    data = join([*lines, *tail]) + b'{"type":"me'
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data)
    offered, in_process = offered_and_in_process(path, monkeypatch)
    assert offered == in_process
    assert [problem.kind for problem in in_process[1]] == ["malformed", "duplicate_id", "torn"]
    assert StoredEntry in {kind for kind, *_ in offered[0]}


@pytest.mark.parametrize(
    "data", [b"", b"\n", b"\n\n  \n", HEADER_LINE, HEADER_LINE + b"\n"], ids=repr
)
def test_files_with_nothing_but_a_header_read_the_same_from_an_offer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    path = tmp_path / "small.jsonl"
    path.write_bytes(data)
    offered, in_process = offered_and_in_process(path, monkeypatch)
    assert offered == in_process


def test_a_long_clean_file_reads_the_same_from_an_offer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random("long")
    lines = base_lines(rng)
    entries = [orjson.loads(line) for line in lines[1:]]
    out = [lines[0]]
    parent = None
    for number in range(3000):
        value = dict(entries[number % len(entries)], id=f"n{number:05d}", parentId=parent)
        out.append(orjson.dumps(value))
        parent = value["id"]
    path = tmp_path / "long.jsonl"
    path.write_bytes(join(out))
    classes: list[type] = []
    offered, in_process = offered_and_in_process(path, monkeypatch, classes)
    assert offered == in_process
    assert all(kind is TailMessageEntry for kind, *_ in offered[0])
    assert set(classes) == {MappedMessageEntry}  # every line left where the child wrote it


def test_the_checked_parsers_inlined_entry_is_the_one_read_makes() -> None:
    # feed_mapped builds pi's usual message line without calling TailMessageEntry.read, as
    # the parser's block loop does: every slot must be set as read() sets it, and the line
    # and its message read from the block as read()'s entry holds and cuts them.
    header = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}'
    first = orjson.dumps(
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        }
    )
    message = first.index(b'"message":') + len(b'"message":')
    block = preparse.MappedLines(
        b"\n" + first + b"\n", array("Q", [0, 1, len(first) + 2]), array("Q", [0, 0, 1 + message])
    )
    parser = CheckedParser("f.jsonl")
    parser.feed(header)
    parser.feed_mapped(block, [None, "a"], [None, None], [None, "user"])  # a blank line first
    (stored,) = parser.finish().entries
    assert type(stored) is MappedMessageEntry
    made = TailMessageEntry.read(
        "message", "a", None, stored.timestamp, first, "user", 3, "f.jsonl"
    )
    slots = {name for cls in TailMessageEntry.__mro__ for name in getattr(cls, "__slots__", ())}
    missing = object()
    for name in sorted(slots - {"__weakref__"}):
        assert getattr(stored, name, missing) == getattr(made, name, missing), name
    assert stored.raw == first and stored.message_bytes() == made.message_bytes()
    assert stored.message_bytes() == orjson.dumps(orjson.loads(first)["message"])
    stored.raw = first  # set: held as any entry's line from then on
    assert stored.lines is None and stored.raw == first
