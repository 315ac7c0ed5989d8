"""Golden tests of the codec against files written by the real pi 0.73.1.

* every line of every session file (legacy ones after migration) decodes as a FileLine and
  re-encodes to the same JSON value, with nothing left over in ``extra``; lines pi itself
  wrote re-encode to the same bytes;
* every event line of every RPC transcript decodes as an AgentSessionEvent and re-encodes to
  exactly the same bytes (pi's key order);
* the ``messages`` of every projection file decode as AgentMessages and re-encode unchanged.

The fixtures live in ``shared/`` beside the repository; when it is missing these tests fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from pitrio.actors.session_store.migrations import migrate_to_current
from pitrio.messages.agent import AgentMessage
from pitrio.messages.codec import decode, encode, from_json, to_json
from pitrio.messages.entries import FileLine, SessionHeader
from pitrio.messages.events import AgentSessionEvent
from tests.shared_dir import SESSIONS, SHARED, TRANSCRIPTS

MISSING = "<fixtures missing>"

# hand-written old-format files (and pi's rewrites of them), not lines pi 0.73.1 appended
LEGACY_PREFIX = "legacy_"


def fixture_names(folder: Path, pattern: str) -> list[str]:
    """File names for parametrizing; a placeholder that fails when there are none."""
    return sorted(path.name for path in folder.glob(pattern)) or [MISSING]


def fixture_path(folder: Path, name: str) -> Path:
    if name == MISSING:
        pytest.fail(f"no fixture files found in {folder} (is shared/ beside the repository?)")
    return folder / name


def nonblank_lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line.strip()]


def leftover_extras(value: Any, path: str = "$") -> list[str]:
    """JSON paths of every non-empty ``extra`` in a decoded value tree."""
    found: list[str] = []
    if attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            child = getattr(value, field.name)
            if field.name == "extra":
                if child:
                    found.append(f"{path}: {sorted(child)}")
            else:
                found.extend(leftover_extras(child, f"{path}.{field.name}"))
    elif isinstance(value, tuple | list):
        for index, item in enumerate(value):
            found.extend(leftover_extras(item, f"{path}[{index}]"))
    return found


def test_fixture_folders_are_present() -> None:
    assert SHARED.is_dir(), f"{SHARED} is missing: the golden fixtures must sit beside the repo"
    assert len(list(SESSIONS.glob("*.jsonl"))) >= 20
    assert len(list(SESSIONS.glob("*.context*.json"))) >= 20
    assert len(list(TRANSCRIPTS.glob("*.out.jsonl"))) >= 13


# --- session files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", fixture_names(SESSIONS, "*.jsonl"))
def test_session_file_lines_round_trip(name: str) -> None:
    path = fixture_path(SESSIONS, name)
    lines = [orjson.loads(line) for line in nonblank_lines(path)]
    lines, _ = migrate_to_current(lines)
    assert lines, f"{name} is empty"
    for number, line in enumerate(lines, start=1):
        where = f"{name}:{number}"
        decoded = from_json(line, FileLine)
        assert isinstance(decoded, SessionHeader) == (number == 1), where
        assert to_json(decoded) == line, where
        assert orjson.loads(encode(decoded)) == line, where
        assert leftover_extras(decoded) == [], where


@pytest.mark.parametrize(
    "name",
    [n for n in fixture_names(SESSIONS, "*.jsonl") if not n.startswith(LEGACY_PREFIX)],
)
def test_session_lines_written_by_pi_re_encode_to_the_same_bytes(name: str) -> None:
    path = fixture_path(SESSIONS, name)
    for number, raw in enumerate(nonblank_lines(path), start=1):
        assert encode(decode(raw, FileLine)) == raw, f"{name}:{number}"


# --- transcripts ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", fixture_names(TRANSCRIPTS, "*.out.jsonl"))
def test_transcript_events_re_encode_to_the_same_bytes(name: str) -> None:
    path = fixture_path(TRANSCRIPTS, name)
    events = 0
    for number, raw in enumerate(nonblank_lines(path), start=1):
        if orjson.loads(raw).get("type") == "response":
            continue
        events += 1
        decoded = decode(raw, AgentSessionEvent)
        assert encode(decoded) == raw, f"{name}:{number}"
        assert leftover_extras(decoded) == [], f"{name}:{number}"
    assert events > 0, f"{name} has no events"


# --- projections ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", fixture_names(SESSIONS, "*.context*.json"))
def test_context_messages_round_trip(name: str) -> None:
    path = fixture_path(SESSIONS, name)
    context = orjson.loads(path.read_bytes())
    messages = context["messages"]
    decoded = from_json(messages, tuple[AgentMessage, ...])
    assert isinstance(decoded, tuple)
    assert len(decoded) == len(messages)
    assert to_json(decoded) == messages
    assert orjson.dumps(to_json(decoded)) == orjson.dumps(messages)  # same key order
    assert leftover_extras(decoded) == []
