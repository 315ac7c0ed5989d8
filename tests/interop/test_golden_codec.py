"""Golden tests of the codec against files written by the real pi 0.73.1 and pi 1.6.0.

* every line of every session file (legacy ones after migration) decodes as a FileLine and
  re-encodes to the same JSON value, with nothing left over in ``extra``; lines pi itself
  wrote re-encode to the same bytes in pi 1.6.0's key order (0.73.1 wrote an assistant
  message's ``errorMessage`` before its ``timestamp``, 1.6.0 after it: see
  ``fixtures/pi16/pi160.retry.session.jsonl``), and lines pi 1.6.0 wrote to exactly the same
  bytes;
* every event line of every RPC transcript decodes as an AgentSessionEvent and re-encodes to
  the same bytes (pi 1.6.0's key order); pi 1.6.0's own events (``fixtures/pi16``) exactly;
* the ``messages`` of every projection file decode as AgentMessages and re-encode unchanged
  (in pi 1.6.0's key order).

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
from tests.shared_dir import FIXTURES, SESSIONS, SHARED, TRANSCRIPTS

MISSING = "<fixtures missing>"

# hand-written old-format files (and pi's rewrites of them), not lines pi 0.73.1 appended
LEGACY_PREFIX = "legacy_"
PI16 = FIXTURES / "pi16"


def pi16_order(value: Any) -> Any:
    """``value`` (JSON pi 0.73.1 wrote) with its keys in pi 1.6.0's order: the one change is
    an assistant message's ``errorMessage``, which 1.6.0 writes after the ``timestamp``."""
    if isinstance(value, list):
        return [pi16_order(item) for item in value]
    if not isinstance(value, dict):
        return value
    ordered = {key: pi16_order(item) for key, item in value.items()}
    if ordered.get("role") == "assistant" and "errorMessage" in ordered and "timestamp" in ordered:
        keys = [key for key in ordered if key != "errorMessage"]
        keys.insert(keys.index("timestamp") + 1, "errorMessage")
        ordered = {key: ordered[key] for key in keys}
    return ordered


def in_pi16_order(raw: bytes) -> bytes:
    """The JSON line ``raw`` re-serialised in pi 1.6.0's key order (compact, as pi writes)."""
    return orjson.dumps(pi16_order(orjson.loads(raw)))


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
        assert encode(decode(raw, FileLine)) == in_pi16_order(raw), f"{name}:{number}"


def test_the_pi16_key_order_moves_only_the_error_message() -> None:
    """The re-ordering above is the one documented difference, nothing else."""
    raw = b'{"role":"assistant","stopReason":"error","errorMessage":"x","timestamp":1,"z":2}'
    assert in_pi16_order(raw) == (
        b'{"role":"assistant","stopReason":"error","timestamp":1,"errorMessage":"x","z":2}'
    )
    untouched = b'{"role":"user","errorMessage":"x","timestamp":1}'
    assert in_pi16_order(untouched) == untouched


@pytest.mark.parametrize("name", fixture_names(PI16, "pi160*.session.jsonl"))
def test_session_lines_written_by_pi16_re_encode_to_the_same_bytes(name: str) -> None:
    path = fixture_path(PI16, name)
    lines = nonblank_lines(path)
    assert any(b'"role":"system"' in line for line in lines), f"{name} has no system message"
    for number, raw in enumerate(lines, start=1):
        decoded = decode(raw, FileLine)
        assert encode(decoded) == raw, f"{name}:{number}"
        assert leftover_extras(decoded) == [], f"{name}:{number}"


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
        assert encode(decoded) == in_pi16_order(raw), f"{name}:{number}"
        assert leftover_extras(decoded) == [], f"{name}:{number}"
    assert events > 0, f"{name} has no events"


# The RPC transport writes message_update in pi 1.6.0's wire form ({type, usage,
# assistantMessageEvent}) from the internal event; the other events are the codec's own.
WIRE_FORM_ONLY = {"response", "message_update", "extension_ui_request"}


@pytest.mark.parametrize("name", fixture_names(PI16, "pi160*.rpc.jsonl"))
def test_pi16_events_re_encode_to_the_same_bytes(name: str) -> None:
    path = fixture_path(PI16, name)
    events = set()
    for number, line in enumerate(nonblank_lines(path), start=1):
        record = orjson.loads(line)
        if record["dir"] != "recv" or record["msg"].get("type") in WIRE_FORM_ONLY:
            continue  # what was sent, the recorder's notes, the transport's own forms
        kind = record["msg"]["type"]
        raw = orjson.dumps(record["msg"])  # pi's bytes: the record keeps its key order
        decoded = decode(raw, AgentSessionEvent)
        assert encode(decoded) == raw, f"{name}:{number}"
        assert leftover_extras(decoded) == [], f"{name}:{number}"
        events.add(kind)
    assert {"agent_settled", "message_end", "agent_end"} <= events, name


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
    # same key order (pi 1.6.0's)
    assert orjson.dumps(to_json(decoded)) == orjson.dumps(pi16_order(messages))
    assert leftover_extras(decoded) == []
