"""Session files written by pi 1.6.0 open in the store, decode entry by entry and re-encode to
the JSON pi wrote (issue 33: pitrio refused every one of them for ``usage.reasoning``).

The files are the transcripts of /work/shared/fixtures/pi16 (a conversation with a tool call,
one retried HTTP 500 with its ``context_edit``, and pi 1.6.0 resuming a 0.73.1 file).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.actors.session_store import SessionStoreHandle, open_store
from pitrio.actors.session_store.stored import UnknownEntry
from pitrio.messages.agent import AssistantMessage, ToolResultMessage, UnknownMessage
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.entries import ContextEditEntry, FileLine, MessageEntry, UsageEntry
from tests.stray_cancel import no_stray_cancel

FIXTURES = Path("/work/shared/fixtures/pi16")
FILES = ["pi160.session.jsonl", "pi160.retry.session.jsonl", "pi160_reads_pi0731.session.jsonl"]

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="the pi 1.6.0 fixtures are absent")


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@asynccontextmanager
async def opened(path: Path) -> AsyncIterator[SessionStoreHandle]:
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path)
        with no_stray_cancel():
            yield store
        await store.aclose()


@pytest.fixture(params=FILES)
def pi_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    # a copy: opening takes the file's lease and may append to it
    copy = tmp_path / request.param
    shutil.copyfile(FIXTURES / request.param, copy)
    return copy


async def test_every_entry_decodes_and_re_encodes_as_pi_wrote_it(pi_file: Path) -> None:
    written = lines(pi_file)
    async with opened(pi_file) as store:
        entries = await store.entries()
        assert [e.id for e in entries] == [line["id"] for line in written[1:]]
        for entry, line in zip(entries, written[1:], strict=True):
            assert not isinstance(entry, UnknownEntry), line["type"]
            # the same keys in the same order, at every depth
            assert orjson.dumps(to_json(entry)) == orjson.dumps(line)
        context = await store.context()
        messages = context.messages.materialize()
    roles = [m.role for m in messages]
    assert "assistant" in roles
    answers = [m for m in messages if isinstance(m, AssistantMessage)]
    for answer in answers:
        if answer.stop_reason != "error" and answer.thinking_level is not None:
            assert answer.thinking_level == "off"
            assert answer.raw_stop_reason in ("stop", "tool_calls")
            assert answer.duration_ms is not None and answer.duration_ms >= 0
            assert answer.usage.reasoning == 0
            assert answer.usage.cost.total_from_provider is False


async def test_the_new_fields_decode_to_their_attributes() -> None:
    written = lines(FIXTURES / "pi160.session.jsonl")
    decoded = [from_json(line, FileLine) for line in written]
    messages = [d.message for d in decoded if isinstance(d, MessageEntry)]
    answers = [m for m in messages if isinstance(m, AssistantMessage)]
    assert [a.raw_stop_reason for a in answers] == ["stop", "tool_calls", "stop"]
    assert all(a.extra is None for a in answers)  # nothing left unknown in 1.6.0's assistants
    assert all(a.usage.extra is None and a.usage.cost.extra is None for a in answers)
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert result.duration_ms == 6 and result.extra is None
    retry = [from_json(line, FileLine) for line in lines(FIXTURES / "pi160.retry.session.jsonl")]
    (edit,) = [d for d in retry if isinstance(d, ContextEditEntry)]
    assert edit.replacement is None
    failed = next(
        d.message
        for d in retry
        if isinstance(d, MessageEntry)
        and isinstance(d.message, AssistantMessage)
        and d.message.stop_reason == "error"
    )
    assert failed.error_message is not None and failed.error_message.startswith("500")
    assert failed.duration_ms == 21 and failed.thinking_level == "off"
    # pi's key order for a failure: errorMessage after the timestamp
    keys = list(to_json(failed))
    assert keys.index("timestamp") < keys.index("errorMessage") < keys.index("durationMs")


async def test_unknown_entry_types_fields_and_roles_are_kept(tmp_path: Path) -> None:
    # what a pi newer than 1.6.0 may write: an entry type, a role and fields pitrio lacks
    path = tmp_path / "future.jsonl"
    base = lines(FIXTURES / "pi160.session.jsonl")
    last = base[-1]["id"]
    future = [
        {"type": "hologram", "id": "f0000001", "parentId": last, "timestamp": "t", "z": [1]},
        {
            "type": "message", "id": "f0000002", "parentId": "f0000001", "timestamp": "t",
            "message": {"role": "oracle", "content": "?", "timestamp": 9, "vision": True},
        },
        {
            "type": "usage", "id": "f0000003", "parentId": "f0000002", "timestamp": "t",
            "kind": "cache_warm", "provider": "mock", "model": "mock-model",
            "usage": {**base[5]["message"]["usage"], "cacheWrite1h": 3, "futureCount": 1},
            "note": "warm", "futureKey": {"a": 1},
        },
    ]  # fmt: skip
    all_lines = [*base, *future]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in all_lines))
    async with opened(path) as store:
        entries = await store.entries()
        by_id = {e.id: e for e in entries}
        assert isinstance(by_id["f0000001"], UnknownEntry)
        message_entry = by_id["f0000002"]
        assert isinstance(message_entry, MessageEntry)
        assert isinstance(message_entry.message, UnknownMessage)
        usage_entry = by_id["f0000003"]
        assert isinstance(usage_entry, UsageEntry)
        assert usage_entry.usage.cache_write_1h == 3
        assert usage_entry.usage.extra == {"futureCount": 1}
        for line in future[1:]:
            assert orjson.dumps(to_json(by_id[line["id"]])) == orjson.dumps(line)
        context = await store.context()
        # the leaf is the usage entry; the unknown role is kept in the tree, not projected
        assert context.leaf_id == "f0000003"
        projected = context.messages.materialize()
        assert not any(isinstance(m, UnknownMessage) for m in projected)
        assert any(isinstance(m, AssistantMessage) for m in projected)
    # the file is untouched by opening and reading it
    assert lines(path) == all_lines


PITRIO = [
    sys.executable,
    "-c",
    "import sys; from pitrio.transports.cli import main; sys.exit(main())",
]
"""The ``pitrio`` command of this environment (its console script's entry point)."""


@pytest.mark.parametrize("name", FILES)
def test_sessions_check_accepts_pi_files(name: str) -> None:
    done = subprocess.run(
        [*PITRIO, "sessions", "check", str(FIXTURES / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith(": ok")
