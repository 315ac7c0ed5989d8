"""pi 1.6.0 appends to a session file pitrio holds, between two prompts (issue 36, item 3).

pi takes no lock, so a pi sharing the agent directory may append to a file a pitrio session is
writing. Here pi 1.6.0's own ``SessionManager`` (``session_manager_append.mjs``, node 22 beside
pi) opens the file of a live pitrio session after its first prompt and appends a user message
and an answer. pitrio's next prompt must follow pi's last entry (its user entry's ``parentId``
is pi's leaf), say so (``entries_merged``), send the model pi's messages too, and pi must then
open the file with both writers' entries in one chain. The same with a plain append from this
process (no node needed) in ``tests/actors/test_session_store_foreign_io.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults.support import fault_session, file_lines
from tests.faults.vendor import answer, running_vendor
from tests.interop.pi_install import find_pi

HERE = Path(__file__).parent
SCRIPT = HERE / "session_manager_append.mjs"
NODE, PI_CLI, SKIP_REASON = find_pi()


def pi_append(file: Path, messages: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    """Append ``messages`` with pi's SessionManager; what a pi opening the file then sees."""
    assert NODE is not None and PI_CLI is not None
    output = work / f"pi-{len(list(work.glob('pi-*.json')))}.json"
    config = {
        "module": str(PI_CLI.parent / "core" / "session-manager.js"),
        "file": str(file),
        "messages": messages,
        "output": str(output),
    }
    subprocess.run([str(NODE), str(SCRIPT), json.dumps(config)], check=True, timeout=60)
    result: dict[str, Any] = json.loads(output.read_text())
    return result


CHAT = ("user", "assistant")
EXPECTED = [
    "first question",
    "first answer",
    "pi asks",
    "pi answers",
    "second question",
    "second answer",
]


def _text(message: Any) -> str:
    return "".join(getattr(part, "text", "") for part in message.content)


def pi_user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def pi_assistant(text: str) -> dict[str, Any]:
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "openai-completions",
        "provider": "pi-side",
        "model": "pi-model",
        "usage": {**{k: 0 for k in zero if k != "total"}, "totalTokens": 0, "cost": zero},
        "stopReason": "stop",
        "timestamp": 2,
    }


async def test_pi_appends_between_two_prompts_and_both_writers_entries_form_one_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if PI_CLI is None:
        pytest.skip(SKIP_REASON)
    async with running_vendor() as vendor:
        vendor.push(answer("first answer"), answer("second answer"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url) as faulted:
            session, recorder = faulted.session, faulted.recorder
            await session.prompt("first question")
            path = session.session_file
            assert path is not None
            pi = pi_append(path, [pi_user("pi asks"), pi_assistant("pi answers")], tmp_path)
            pi_leaf = pi["appended"][-1]
            assert pi["leafId"] == pi_leaf
            await session.prompt("second question")
            merged = recorder.of("entries_merged")
            assert [event.entry_ids for event in merged] == [tuple(pi["appended"])]
            assert str(path) == merged[0].path
            # The model was sent pi's exchange before the second question.
            second = vendor.requests[1]
            assert second.user_texts() == ["first question", "pi asks", "second question"]
            assert second.assistant_texts() == ["first answer", "pi answers"]
            live = [_text(m) for m in await session.messages() if m.role in CHAT]
            assert live == EXPECTED
    users = [line for line in file_lines(path) if line.get("type") == "message"]
    second_user = next(
        line
        for line in users
        if line["message"]["role"] == "user"
        and line["message"]["content"][0]["text"] == "second question"
    )
    assert second_user["parentId"] == pi_leaf
    seen = pi_append(path, [], tmp_path)  # pi opens the result
    entries = seen["entries"]
    ids = [entry_id for entry_id, _ in entries]
    assert len(ids) == len(set(ids)) == len(file_lines(path)) - 1  # every line, once
    chain_to_leaf: list[str] = []
    parents = dict(entries)
    at: str | None = seen["leafId"]
    while at is not None:
        chain_to_leaf.append(at)
        at = parents[at]
    assert set(pi["appended"]) <= set(chain_to_leaf)  # pi's entries on the path to the leaf
    assert [text for role, text in seen["context"] if role in CHAT] == EXPECTED
