"""Issue 21 item 8 and part of 9: what the state, the events and the file say after an abort
of a retry's back-off, a compaction or a new session during a stream, a bash run during a
run, a clone of an empty session; each checked against pi 0.73.1's answers, re-anchored on
pi 1.6.0 (its leading system message is counted and listed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.model_router import FauxProvider, FauxReply, FixtureRules
from tests.transports.rpc.harness import RpcClient, events_of, served, slow_summaries

PACED = 200.0  # tokens per second: a SLOW reply of the fixture rules streams for ~1.3 s
FAILED = "503 Service Unavailable (scripted)"
# A back-off no test waits for: only an abort ends it.
LONG_BACKOFF = {"retry": {"enabled": True, "maxRetries": 3, "baseDelayMs": 600_000}}


def file_entries(path: str, *, missing_ok: bool = False) -> list[dict[str, Any]]:
    file = Path(path)
    if missing_ok and not file.exists():
        return []
    return [orjson.loads(line) for line in file.read_bytes().splitlines() if line]


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["role"]) for m in messages]


async def message_roles(client: RpcClient) -> list[str]:
    return roles((await client.data({"type": "get_messages"}))["messages"])


@pytest.mark.parametrize("command", ["abort_retry", "abort"])
async def test_the_failed_attempt_leaves_the_state_when_the_back_off_starts(
    tmp_path: Path, command: str
) -> None:
    """pi: during the back-off and after it is cut short, messageCount is 1 (the prompt),
    isStreaming is false; the failed response stays in the file (here with the context_edit
    that takes it out of the projection, DESIGN §5.6)."""
    faux = FauxProvider([FauxReply(error=FAILED)], default="not asked")
    async with served(tmp_path, faux, settings=LONG_BACKOFF) as client:
        await client.send({"id": "p", "type": "prompt", "message": "flaky"})
        await client.event("auto_retry_start")
        during = await client.data({"type": "get_state"})
        during_roles = await message_roles(client)
        await client.data({"type": command})
        await client.event("agent_settled")
        after = await client.data({"type": "get_state"})
        after_roles = await message_roles(client)
    # pi 1.6.0 counts the session's leading system message too.
    assert (during["isStreaming"], during["messageCount"]) == (False, 2)
    assert during_roles == ["system", "user"]
    assert (after["isStreaming"], after["messageCount"]) == (False, 2)
    assert after_roles == ["system", "user"]
    [retry_end] = events_of(client.lines, "auto_retry_end")
    assert (retry_end["success"], retry_end["finalError"]) == (False, "Retry cancelled")
    entries = file_entries(after["sessionFile"])
    failed = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    assert [e["message"]["stopReason"] for e in failed] == ["error"]
    edits = [e for e in entries if e["type"] == "context_edit"]
    assert [e["targetId"] for e in edits] == [failed[0]["id"]]
    assert len(faux.requests) == 1


async def test_compact_while_streaming_keeps_and_compacts_the_aborted_reply(
    tmp_path: Path,
) -> None:
    """pi 1.6.0 aborts the run as ``abort`` does before a compaction (0.73.1 dropped the
    reply unreported): the partial reply gets its message_end (stopReason ``aborted``) and the
    run its agent_end before the compact response, the reply is written to the file, and the
    compaction cuts with it in the context: a split turn kept from the aborted reply, whose
    prompt is summarized as the turn's context. A first prompt alone is "Nothing to compact"
    in pi 1.6.0, so the prompt before it is long enough to leave a turn to summarize. The
    compaction entry says fromHook false (no extension supplied it)."""
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=PACED)
    # The smallest budget: the partial reply alone fills it, so the cut lands on it.
    settings = {"compaction": {"keepRecentTokens": 1}}
    async with served(tmp_path, faux, settings=settings) as client:
        await client.data({"type": "prompt", "message": "first " * 100})
        await client.event("agent_settled", 1)
        # Three updates of the slow reply itself (the first reply's are already there).
        streamed = len(events_of(client.lines, "message_update")) + 3
        await client.send({"id": "p", "type": "prompt", "message": "SLOW please"})
        await client.wait_until(lambda lines: len(events_of(lines, "message_update")) >= streamed)
        compacted = await client.data({"type": "compact"})
        ends_at_reply = len(events_of(client.lines, "agent_end"))
        state = await client.data({"type": "get_state"})
        after_roles = await message_roles(client)
        ends_before_next = len(events_of(client.lines, "message_end"))
        await client.data({"type": "prompt", "message": "hello"})
        await client.event("agent_settled", 3)
    agent_ends = events_of(client.lines, "agent_end")
    assert ends_at_reply == 2  # the aborted run's agent_end comes before the compact reply
    assert agent_ends[1]["messages"][-1]["stopReason"] == "aborted"
    assert agent_ends[-1]["messages"][-1]["stopReason"] == "stop"
    assert len(agent_ends) == 3
    ends = events_of(client.lines, "message_end")[:ends_before_next]
    assert roles([e["message"] for e in ends]) == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert ends[-1]["message"]["stopReason"] == "aborted"
    entries = file_entries(state["sessionFile"])
    recorded = [e for e in entries if e["type"] == "message"]
    aborted = recorded[4]
    assert (aborted["message"]["role"], aborted["message"]["stopReason"]) == (
        "assistant",
        "aborted",
    )
    # The cut keeps the aborted reply; its prompt is summarized as a split turn's context.
    [compaction] = [e for e in entries if e["type"] == "compaction"]
    assert compaction["firstKeptEntryId"] == aborted["id"]
    assert compaction["parentId"] == aborted["id"]
    assert "**Turn Context (split turn):**" in compaction["summary"]
    assert compacted["firstKeptEntryId"] == aborted["id"]
    assert compaction["fromHook"] is False
    # pi 1.6.0: the compaction's system checkpoint leads the context, then the kept reply.
    assert after_roles == ["system", "compactionSummary", "assistant"]
    assert state["messageCount"] == 3
    assert [(e["message"]["role"], e["message"].get("stopReason")) for e in recorded] == [
        ("system", None),
        ("user", None),
        ("assistant", "stop"),
        ("user", None),
        ("assistant", "aborted"),
        ("user", None),
        ("assistant", "stop"),
    ]


async def test_new_session_while_streaming_settles_the_run_into_the_old_session(
    tmp_path: Path,
) -> None:
    """pi 1.6.0 settles the run before it replaces the session (``teardownCurrent``: abort,
    then ``session_shutdown``): the partial reply gets its message_end (``aborted``) and the
    run its agent_end before the new_session response, and the aborted turn is written to the
    outgoing session's file. (0.73.1 stopped listening first: no agent_end, nothing written.)"""
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=PACED)
    async with served(tmp_path, faux) as client:
        old = (await client.data({"type": "get_state"}))["sessionFile"]
        await client.send({"id": "p", "type": "prompt", "message": "SLOW please"})
        await client.wait_until(lambda lines: len(events_of(lines, "message_update")) >= 3)
        await client.data({"type": "new_session"})
        ends_at_reply = len(events_of(client.lines, "agent_end"))
        state = await client.data({"type": "get_state"})
    agent_ends = events_of(client.lines, "agent_end")
    assert ends_at_reply == 1 and len(agent_ends) == 1  # before the new_session response
    assert agent_ends[0]["messages"][-1]["stopReason"] == "aborted"
    ended = [e["message"] for e in events_of(client.lines, "message_end")]
    assert roles(ended) == ["system", "user", "assistant"]
    assert ended[-1]["stopReason"] == "aborted"
    assert state["messageCount"] == 0 and state["sessionFile"] != old
    old_entries = file_entries(old)
    recorded = [e["message"] for e in old_entries if e["type"] == "message"]
    assert roles(recorded) == ["system", "user", "assistant"]
    assert recorded[-1]["stopReason"] == "aborted"
    assert recorded[-1]["content"] == ended[-1]["content"]  # the partial text, as streamed


async def test_bash_during_a_run_is_recorded_at_the_next_prompt(tmp_path: Path) -> None:
    """pi keeps a bash run during a run aside until the next prompt: not in the context or
    the file when the run ends, then recorded just before the new prompt."""
    faux = FauxProvider([FauxReply(text="word " * 200), "second answer"], tokens_per_second=PACED)
    async with served(tmp_path, faux) as client:
        await client.send({"id": "p", "type": "prompt", "message": "first"})
        await client.event("message_update")
        await client.send({"id": "b", "type": "bash", "command": "echo during"})
        assert (await client.response("b"))["success"] is True
        # The command finished while the run streamed (else this test proves nothing).
        assert events_of(client.lines, "agent_end") == []
        await client.event("agent_settled")
        after_run = await message_roles(client)
        state = await client.data({"type": "get_state"})
        file_after_run = file_entries(state["sessionFile"])
        await client.data({"type": "prompt", "message": "second"})
        await client.event("agent_settled", 2)
    assert after_run == ["system", "user", "assistant"]
    assert [e["message"]["role"] for e in file_after_run if e["type"] == "message"] == [
        "system",
        "user",
        "assistant",
    ]
    recorded = [e["message"] for e in file_entries(state["sessionFile"]) if e["type"] == "message"]
    assert roles(recorded) == ["system", "user", "assistant", "bashExecution", "user", "assistant"]
    assert recorded[3]["command"] == "echo during"


async def test_clone_of_a_session_without_messages_fails(tmp_path: Path) -> None:
    """pi refuses (it has no file to branch from yet); the session stays as it was."""
    async with served(tmp_path) as client:
        before = await client.data({"type": "get_state"})
        refused = await client.request({"type": "clone"})
        after = await client.data({"type": "get_state"})
        await client.data({"type": "prompt", "message": "hello"})
        await client.event("agent_settled")
        cloned = await client.data({"type": "clone"})
    assert refused["success"] is False
    assert refused["error"] == "Cannot clone: the session has no messages yet"
    assert after["sessionFile"] == before["sessionFile"]
    assert cloned == {"cancelled": False}


async def test_a_compaction_entry_says_whether_an_extension_supplied_it(tmp_path: Path) -> None:
    """pi writes fromHook on every compaction entry: false for its own summary."""
    settings = {"compaction": {"keepRecentTokens": 60}}
    async with served(tmp_path, settings=settings) as client:
        # Long enough to leave the first turn to summarize (pi 1.6.0 refuses otherwise).
        for text in ("first question " * 30, "second question " * 30):
            await client.data({"type": "prompt", "message": text})
            await client.event("agent_settled", 1 if text.startswith("first") else 2)
        await client.data({"type": "compact"})
        state = await client.data({"type": "get_state"})
    [compaction] = [e for e in file_entries(state["sessionFile"]) if e["type"] == "compaction"]
    assert compaction["fromHook"] is False


@pytest.mark.parametrize("attempt", range(4))
async def test_an_aborted_compaction_is_answered_before_the_abort(
    tmp_path: Path, attempt: int
) -> None:
    """pi 1.6.0: abort waits for the session to be idle, so the compact request's error (and
    compaction_end before it) comes before the abort's answer. Both are answered in one step
    of the session actor; before the fix their order was the scheduler's (repeated because a
    wrong order shows only some of the time). Only the summary is paced (the prompts before
    it cost 2 s a run at that pace, and the order at stake is decided after them)."""
    faux = FauxProvider(default=slow_summaries(), tokens_per_second=20.0)
    settings = {"compaction": {"keepRecentTokens": 60}}
    async with served(tmp_path, faux, settings=settings) as client:
        for text in ("first question " * 30, "second question " * 30):
            await client.data({"type": "prompt", "message": text})
            await client.event("agent_settled", 1 if text.startswith("first") else 2)
        await client.send({"id": "c", "type": "compact"})
        await client.event("compaction_start")
        await client.send({"id": "a", "type": "abort"})
        compact, abort = await client.response("c"), await client.response("a")
    assert (compact["success"], abort["success"]) == (False, True)
    order = [
        line.get("id") or line["type"]
        for line in client.lines
        if line.get("id") in ("c", "a") or line["type"] == "compaction_end"
    ]
    assert order == ["compaction_end", "c", "a"]
    [end] = events_of(client.lines, "compaction_end")
    assert end["aborted"] is True
