"""The example extensions of ``examples/extensions/`` do what their docstrings say, loaded
into real sessions (and the permission gate over real RPC pipes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import pitrio
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.content import text_of
from pitrio.messages.entries import CompactionEntry, CustomEntry
from pitrio.messages.events import ExtensionUiRequest
from tests.transports.rpc.harness import Dirs, rpc_process

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "extensions"


@pytest.fixture(autouse=True)
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    return agent


def _bash(command: str) -> FauxReply:
    return FauxReply(tool_calls=(FauxToolCall("bash", {"command": command}),))


async def test_permission_gate_blocks_rm_without_a_client(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "keep.txt").write_text("precious")
    faux = FauxProvider([_bash("rm keep.txt"), _bash("echo fine"), FauxReply(text="ok")])
    async with pitrio.create_session(
        cwd=str(project),
        model="faux/faux-1",
        faux=faux,
        persist=False,
        extensions=[str(EXAMPLES / "permission_gate.py")],
    ) as session:
        await session.prompt("clean up")
        messages = await session.messages()
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and "confirmation" in text_of(results[0].content)
    assert not results[1].is_error and text_of(results[1].content).strip() == "fine"
    assert (project / "keep.txt").exists()


async def test_permission_gate_asks_the_rpc_client(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    (dirs.cwd / "doomed.txt").write_text("x")
    (dirs.cwd / "kept.txt").write_text("y")
    gate = str(EXAMPLES / "permission_gate.py")
    # The fixtures' faux rules turn <<tool {args}>> into a call (fixtures README).
    async with rpc_process(dirs, "-e", gate) as rpc:
        await rpc.send(
            {"id": "p1", "type": "prompt", "message": 'Go <<bash {"command": "rm doomed.txt"}>>'}
        )
        ask = await rpc.event("extension_ui_request")
        await rpc.send({"type": "extension_ui_response", "id": ask["id"], "confirmed": True})
        await rpc.event("agent_settled")
        await rpc.send(
            {"id": "p2", "type": "prompt", "message": 'Go <<bash {"command": "rm kept.txt"}>>'}
        )
        ask2 = await rpc.event("extension_ui_request", 2)
        await rpc.send({"type": "extension_ui_response", "id": ask2["id"], "confirmed": False})
        await rpc.event("agent_settled", 2)
    assert ask["method"] == "confirm" and "rm doomed.txt" in ask["message"]
    assert not (dirs.cwd / "doomed.txt").exists()
    assert (dirs.cwd / "kept.txt").exists()
    ends = [e for e in rpc.by_type["tool_execution_end"] if e["toolName"] == "bash"]
    assert ends[-1]["isError"] is True
    assert "refused" in ends[-1]["result"]["content"][0]["text"]


async def test_word_count_tool(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "poem.txt").write_text("one two\nthree\n")
    faux = FauxProvider(
        [FauxReply(tool_calls=(FauxToolCall("word_count", {"path": "poem.txt"}),)), "done"]
    )
    async with pitrio.create_session(
        cwd=str(project),
        model="faux/faux-1",
        faux=faux,
        persist=False,
        extensions=[str(EXAMPLES / "word_count_tool.py")],
    ) as session:
        await session.prompt("count")
        messages = await session.messages()
    result = next(m for m in messages if isinstance(m, ToolResultMessage))
    assert text_of(result.content) == "poem.txt: 2 lines, 3 words, 14 characters"
    assert result.details == {"lines": 2, "words": 3, "chars": 14}
    prompt = faux.requests[0].context.system_prompt
    assert "word_count: Count lines, words and characters of a file" in prompt
    assert "Use word_count instead of bash wc for a single file." in prompt


async def test_stats_command(tmp_path: Path) -> None:
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"),
        model="faux/faux-1",
        session_dir=str(tmp_path / "s"),
        extensions=[str(EXAMPLES / "stats_command.py")],
        ui_clients=True,
    ) as session:
        events = await session.subscribe()
        await session.prompt("hello")
        await session.prompt("/stats")
        entries = await session.handle.state()
        notify: Any = None
        with trio.fail_after(5):
            while notify is None:
                event = (await events.receive()).event
                if isinstance(event, ExtensionUiRequest):
                    notify = event
        stored = await session.store.entries()
    assert entries is not None
    # pi 1.6.0 stores the session's system message as a message entry too.
    assert notify.method == "notify" and "assistant: 1, system: 1, user: 1" in notify.message
    custom = next(e for e in stored if isinstance(e, CustomEntry))
    assert custom.custom_type == "stats"
    assert custom.data["messages"] == {"assistant": 1, "system": 1, "user": 1}


async def test_custom_compaction(tmp_path: Path, agent_dir: Path) -> None:
    (agent_dir / "settings.json").write_text('{"compaction": {"keepRecentTokens": 60}}')
    faux = FauxProvider()
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"),
        model="faux/faux-1",
        faux=faux,
        session_dir=str(tmp_path / "s"),
        extensions=[str(EXAMPLES / "custom_compaction.py")],
    ) as session:
        for index in range(3):
            await session.prompt(f"request {index}\n" + "filler " * 40)
        requests = len(faux.requests)
        result = await session.compact()
        stored = await session.store.entries()
    assert len(faux.requests) == requests  # no model call
    assert result.summary.startswith("## Requests so far\n- request 0")
    entry = next(e for e in stored if isinstance(e, CompactionEntry))
    assert entry.details == {"source": "custom_compaction example"}
