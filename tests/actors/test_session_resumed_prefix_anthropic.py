"""A resumed session's first Anthropic Messages request is built from the stored JSON (issue 38):
the same bytes as the typed path's, with the cache mark or without it, under an API key, an
OAuth token (outside a thread not seeded: the names are renamed) and in message threads (plain
turns seeded from the prefix, under an API key or an OAuth token), the transcript's answers
the model's own or another's; and the stored transcript is left undecoded where the prefix
took it (see ``test_session_resumed_prefix`` for Chat Completions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

import pitrio
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.messages.snapshot import Snapshot
from tests.actors.providers.loopback import loopback_server, recording, sse
from tests.actors.test_session_resumed_prefix import write_session

KEY = "k"
OAUTH = "sk-ant-oat01-token"


def _agent_dir(root: Path, base_url: str, *, key: str, threads: bool, block: bool) -> Path:
    agent = root / "agent"
    agent.mkdir(exist_ok=True)
    model: dict[str, Any] = {"id": "m", "input": ["text", "image"]}
    if threads:
        model["compat"] = {"supportsMessageThreads": True}
    models = {
        "providers": {
            "mock": {
                "baseUrl": base_url,
                "api": "anthropic-messages",
                "apiKey": key,
                "models": [model],
            }
        }
    }
    (agent / "models.json").write_text(json.dumps(models))
    settings = {"images": {"blockImages": True}} if block else {}
    (agent / "settings.json").write_text(json.dumps(settings))
    return agent


async def _bodies(
    root: Path, session_file: Path, *, key: str, threads: bool, retention: str, block: bool
) -> tuple[list[bytes], int]:
    """Each request body of two prompts to the resumed session, and how many stored
    messages were decoded by the end."""
    decoded = 0
    original = StoredEntry._to_message

    def counting(self: StoredEntry) -> Any:
        nonlocal decoded
        decoded += 1
        return original(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StoredEntry, "_to_message", counting)
        patch.setenv("PITRIO_CACHE_RETENTION", retention)
        async with loopback_server() as server:
            agent = _agent_dir(root, server.base_url, key=key, threads=threads, block=block)
            patch.setenv("PITRIO_AGENT_DIR", str(agent))
            server.push(*(sse(recording("anthropic_text.sse")) for _ in range(2)))
            async with pitrio.create_session(
                cwd=str(root), model="mock/m", session=str(session_file)
            ) as session:
                for index in range(2):
                    await session.prompt(f"next {index}")
                    await session.wait_for_idle()
            bodies = [request.body for request in server.requests]
    return bodies, decoded


@pytest.mark.parametrize(
    ("key", "threads", "retention", "own", "block"),
    [
        (KEY, False, "short", True, False),
        (KEY, False, "short", False, False),
        (KEY, False, "none", True, False),
        (KEY, False, "long", False, False),
        (KEY, False, "short", True, True),
        (OAUTH, False, "short", True, False),
        (KEY, True, "short", True, False),
        (KEY, True, "long", False, False),
        (OAUTH, True, "short", True, False),
        (KEY, True, "short", True, True),
    ],
)
async def test_the_first_request_is_the_typed_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, threads: bool, retention: str,
    own: bool, block: bool,
) -> None:  # fmt: skip
    turns = 200
    for name in ("lazy", "typed"):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "session.jsonl"
        count = write_session(path, turns)
        if own:  # the stored answers as the model's own (their thinking would keep signatures)
            data = path.read_bytes().replace(b'"openai-completions"', b'"anthropic-messages"')
            path.write_bytes(data)
    options = {"key": key, "threads": threads, "retention": retention, "block": block}
    lazy, lazy_decoded = await _bodies(tmp_path, tmp_path / "lazy" / "session.jsonl", **options)
    monkeypatch.setattr(Snapshot, "head", lambda self: None)  # the typed path: no stored head
    typed, typed_decoded = await _bodies(tmp_path, tmp_path / "typed" / "session.jsonl", **options)
    assert len(lazy) == len(typed) == 2
    assert lazy == typed  # byte for byte
    first = orjson.loads(lazy[0])
    assert len(first["messages"]) > turns * 2
    marked = b'"cache_control"' in lazy[0]
    assert marked == (retention != "none")
    assert typed_decoded >= count
    if block:  # the prefix ends at the tool result holding an image; the rest decoded
        image_at = next(
            i for i, line in enumerate(path.read_bytes().splitlines()) if b'"image"' in line
        )
        assert count - image_at <= lazy_decoded <= count - image_at + 8
    elif key == KEY or threads:  # from the stored JSON (encoded, or plain in a thread)
        assert lazy_decoded <= 8
    else:  # an OAuth token outside a thread: names renamed, typed as before
        assert lazy_decoded >= count - 8
