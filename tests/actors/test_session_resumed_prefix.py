"""A resumed session's first turn keeps its stored transcript undecoded (issue 38).

The loop's run context, the session's converter and the Chat Completions builder take the
stored messages as a view (``Snapshot.over``, ``ConvertedView``), and the builder starts from
the items :mod:`pitrio._prefix_chat` makes from their JSON: only what that module does not
take, and what a request reads one at a time, is decoded. The request must be the one the
typed path sends, byte for byte, on the first turn and after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import pitrio
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.messages.snapshot import Snapshot
from tests.actors import extension_probe
from tests.actors.providers.loopback import loopback_server, recording, sse
from tests.prefix_chat_support import USAGE


def _assistant(content: list[Any], stop: str, at: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "mock",
        "model": "m",
        "usage": USAGE,
        "stopReason": stop,
        "timestamp": at,
    }


def _messages(turns: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(entry type, body)`` of a session's entries after its header: a system message,
    then turns of plain answers, tool calls with results (one with an image), and, midway,
    a custom message (converted at once, not from its JSON)."""
    yield "message", {"role": "system", "content": "You are terse.", "timestamp": 1}
    for turn in range(turns):
        at = 1000 + turn * 10
        yield "message", {"role": "user", "content": f"turn {turn}", "timestamp": at}
        if turn % 3 == 1:
            call = {"type": "toolCall", "id": f"call_{turn}", "name": "read", "arguments": {}}
            yield "message", _assistant([call], "toolUse", at + 1)
            content: list[Any] = [{"type": "text", "text": f"file {turn}"}]
            if turn == 10:
                content.append({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"})
            yield (
                "message",
                {
                    "role": "toolResult",
                    "toolCallId": f"call_{turn}",
                    "toolName": "read",
                    "content": content,
                    "isError": False,
                    "timestamp": at + 2,
                },
            )
        yield "message", _assistant([{"type": "text", "text": f"answer {turn}"}], "stop", at + 3)
        if turn == turns // 2:
            yield "custom_message", {"customType": "note", "content": "a note", "display": True}


def write_session(path: Path, turns: int, *, compacted: bool = False) -> int:
    """A session file of ``turns`` turns (``compacted``: with a compaction a third of the way
    in, keeping from the turn before it); how many entries follow its header."""
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "5e551011-0000-4000-8000-000000000000",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": str(path.parent),
        }
    ]
    parent = None
    count = 0
    bodies = list(_messages(turns))
    if compacted:
        at = len(bodies) // 3
        summary = {"summary": "what happened", "firstKeptEntryId": f"e{at - 4:07d}"}
        bodies.insert(at, ("compaction", {**summary, "tokensBefore": 5000}))
    for index, (kind, body) in enumerate(bodies):
        entry: dict[str, Any] = {
            "type": kind,
            "id": f"e{index:07d}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
        }
        entry.update({"message": body} if kind == "message" else body)
        lines.append(entry)
        parent = entry["id"]
        count += 1
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return count


def _agent_dir(root: Path, base_url: str, *, block_images: bool) -> Path:
    agent = root / "agent"
    agent.mkdir(exist_ok=True)
    models = {
        "providers": {
            "mock": {
                "baseUrl": f"{base_url}/v1",
                "api": "openai-completions",
                "apiKey": "k",
                "models": [{"id": "m", "input": ["text", "image"]}],
            }
        }
    }
    (agent / "models.json").write_text(json.dumps(models))
    settings = {"images": {"blockImages": True}} if block_images else {}
    (agent / "settings.json").write_text(json.dumps(settings))
    return agent


async def _turns(
    root: Path,
    session_file: Path,
    *,
    block_images: bool,
    prompts: int,
    extensions: list[str] | None = None,
) -> tuple[list[Any], int]:
    # ``root`` is the cwd (the system prompt names it) and holds the agent dir.
    """Each request body a resumed session sends for ``prompts`` prompts, and how many
    stored messages were decoded by the end."""
    decoded = 0
    original = StoredEntry._to_message

    def counting(self: StoredEntry) -> Any:
        nonlocal decoded
        decoded += 1
        return original(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StoredEntry, "_to_message", counting)
        async with loopback_server() as server:
            agent = _agent_dir(root, server.base_url, block_images=block_images)
            patch.setenv("PITRIO_AGENT_DIR", str(agent))
            server.push(*(sse(recording("openai_completions_text.sse")) for _ in range(prompts)))
            async with pitrio.create_session(
                cwd=str(root),
                model="mock/m",
                session=str(session_file),
                **({"extensions": extensions} if extensions else {}),
            ) as session:
                for index in range(prompts):
                    await session.prompt(f"next {index}")
                    await session.wait_for_idle()
            bodies = [request.json() for request in server.requests]
    return bodies, decoded


@pytest.mark.parametrize("block_images", [False, True])
async def test_the_first_turn_decodes_only_what_the_prefix_leaves_and_sends_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_images: bool
) -> None:
    turns = 300
    (tmp_path / "lazy").mkdir()
    (tmp_path / "typed").mkdir()
    count = write_session(tmp_path / "lazy" / "session.jsonl", turns)
    write_session(tmp_path / "typed" / "session.jsonl", turns)
    lazy, lazy_decoded = await _turns(
        tmp_path, tmp_path / "lazy" / "session.jsonl", block_images=block_images, prompts=2
    )
    # The typed path: no stored head, so every message is decoded and fed as before.
    monkeypatch.setattr(Snapshot, "head", lambda self: None)
    typed, typed_decoded = await _turns(
        tmp_path, tmp_path / "typed" / "session.jsonl", block_images=block_images, prompts=2
    )
    assert len(lazy) == len(typed) == 2
    for mine, theirs in zip(lazy, typed, strict=True):
        assert orjson.dumps(mine) == orjson.dumps(theirs)
    assert len(lazy[0]["messages"]) > turns * 2
    assert typed_decoded >= count
    # Decoded: the first message (the builders' cache key), the system message, the custom
    # one (converted when the view is made), the last assistant message: a handful. With
    # images blocked, the prefix ends at the tool result holding one, and the rest is
    # decoded and fed as before.
    if block_images:
        image_at = next(i for i, (_, body) in enumerate(_messages(turns)) if "image" in str(body))
        assert count - image_at <= lazy_decoded <= count - image_at + 8
    else:
        assert lazy_decoded <= 8


@pytest.mark.parametrize("handler", ["tool_call", "context"])
async def test_an_extension_decodes_the_transcript_only_for_a_context_handler(
    tmp_path: Path, handler: str
) -> None:
    # An extension host wraps the loop's hooks; one without a context handler leaves the
    # stored transcript undecoded, as without extensions (issue 38). A context handler is
    # given the messages, so they are decoded for it.
    seen: list[int] = []

    def setup(api: Any) -> None:
        def on_context(event: Any, ctx: Any) -> None:
            seen.append(len(event.messages))

        api.on(handler, on_context)

    extension_probe.setup = setup
    bridge = extension_probe.write_bridge(tmp_path / "exts")
    count = write_session(tmp_path / "session.jsonl", 300)
    bodies, decoded = await _turns(
        tmp_path, tmp_path / "session.jsonl", block_images=False, prompts=1,
        extensions=[str(bridge)],
    )  # fmt: skip
    assert len(bodies) == 1 and len(bodies[0]["messages"]) > 600
    if handler == "context":
        # The handler sees the transcript without its system message, and the prompt.
        assert seen == [count] and decoded >= count
    else:
        assert seen == [] and decoded <= 8
