"""The RPC server in this process, over memory streams: ordering, concurrency, formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from pitrio.actors.model_router import FauxProvider, FauxReply, FixtureRules
from tests.transports.rpc.harness import RpcClient, events_of, served

PACED = 200.0  # tokens per second, the fixtures' pace: a SLOW reply streams for ~1.3 s


def types(lines: list[dict[str, Any]]) -> list[str]:
    return [str(line["type"]) for line in lines]


def index_of(lines: list[dict[str, Any]], predicate: Any) -> int:
    return next(i for i, line in enumerate(lines) if predicate(line))


def response_index(client: RpcClient, request_id: str) -> int:
    return index_of(
        client.lines, lambda line: line["type"] == "response" and line.get("id") == request_id
    )


async def test_prompt_is_answered_before_its_run_starts(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        await client.send({"id": "p", "type": "prompt", "message": "Hello"})
        await client.event("agent_settled")
    # pi 1.6.0's sequence (fixtures/pi16/pi160.rpc.jsonl): no entry_appended for the entries
    # whose messages the events already carry.
    assert types(client.lines) == [
        "response",
        "agent_start",
        "turn_start",
        "message_start",  # the session's system message (pi 1.6.0)
        "message_end",
        "message_start",
        "message_end",
        "message_start",
        "message_update",
        "message_update",
        "message_update",
        "message_update",
        "message_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    end = events_of(client.lines, "message_end")[-1]
    assert end["message"]["content"] == [{"type": "text", "text": "You said: Hello"}]
    assert events_of(client.lines, "agent_end")[0]["willRetry"] is False


async def test_every_entry_is_announced_when_asked(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        fmt = await client.data({"type": "set_event_format", "entries": "all"})
        await client.send({"id": "p", "type": "prompt", "message": "Hello"})
        await client.event("agent_settled")
        await client.data({"type": "set_session_name", "name": "named"})
        back = await client.data({"type": "set_event_format", "entries": "pi"})
        await client.data({"type": "set_session_name", "name": "renamed"})
        entries = await client.data({"type": "get_entries"})
    assert fmt == {"entries": "all"} and back == {"entries": "pi"}
    run = types(client.lines)[types(client.lines).index("agent_start") :]
    # Each message entry right after its message_end, in the file's order.
    assert run[:12] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "entry_appended",
        "message_start",
        "message_end",
        "entry_appended",
        "message_start",
        "message_update",
        "message_update",
        "message_update",
    ]
    announced = [e["entry"] for e in events_of(client.lines, "entry_appended")]
    kinds = [(e["type"], e.get("message", {}).get("role"), e.get("name")) for e in announced]
    assert kinds == [
        ("message", "system", None),
        ("message", "user", None),
        ("message", "assistant", None),
        ("session_info", None, "named"),  # the second name is not announced: "pi" again
    ]
    written = [e["id"] for e in entries["entries"]]
    places = [written.index(e["id"]) for e in announced]
    assert places == sorted(places)  # announced in the file's order
    [renamed] = [e for e in entries["entries"] if e.get("name") == "renamed"]
    assert renamed["id"] not in [e["id"] for e in announced]


async def test_a_bad_event_format_changes_nothing(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        bad = await client.request(
            {"type": "set_event_format", "updates": "delta", "entries": "some"}
        )
        none = await client.request({"type": "set_event_format"})
        await client.send({"id": "p", "type": "prompt", "message": "Hello"})
        await client.event("agent_settled")
    assert bad["success"] is False
    assert bad["error"] == 'Unknown entries format: "some" (use "pi" or "all")'
    assert none["success"] is False and "updates" in none["error"]
    # Neither half applied: full updates (with usage), no entry_appended.
    assert "entry_appended" not in types(client.lines)
    assert all("usage" in u for u in events_of(client.lines, "message_update"))


async def test_events_of_a_command_precede_its_response(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        await client.data({"type": "set_model", "provider": "faux", "modelId": "faux-think"})
        await client.data({"type": "set_session_name", "name": " named "})
        await client.data({"type": "cycle_thinking_level"})
        await client.data({"type": "prompt", "message": "one"})
        await client.event("agent_settled")
        # Past the 60 kept tokens, so "one" is summarized (pi 1.6.0: a branch that fits the
        # kept budget is nothing to compact; the system message is no history).
        await client.data({"type": "prompt", "message": "two " + "padding " * 40})
        await client.event("agent_settled", 2)
        compacted = await client.data({"type": "compact"})
    # set_model (r1) announces nothing in pi 1.6.0: its model_change entry is not announced.
    assert types(client.lines)[response_index(client, "r1") - 1] == "response"
    pairs = [
        ("r2", "session_info_changed"),
        ("r3", "thinking_level_changed"),
        ("r6", "compaction_end"),
    ]
    for request_id, event in pairs:
        answer = response_index(client, request_id)
        assert client.lines[answer - 1]["type"] in (event, "entry_appended"), request_id
        assert event in types(client.lines[max(0, answer - 3) : answer])
    assert compacted["summary"].startswith("## Goal")


async def test_abort_is_answered_after_the_run_ended(tmp_path: Path) -> None:
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=PACED)
    async with served(tmp_path, faux) as client:
        await client.send({"id": "p", "type": "prompt", "message": "SLOW please"})
        await client.wait_until(lambda lines: len(events_of(lines, "message_update")) >= 3)
        await client.data({"type": "abort"})
        answer = response_index(client, "r1")
        last = await client.data({"type": "get_last_assistant_text"})
    assert types(client.lines)[answer - 2 : answer] == ["agent_end", "agent_settled"]
    [end] = [
        e for e in events_of(client.lines, "message_end") if e["message"]["role"] == "assistant"
    ]
    assert end["message"]["stopReason"] == "aborted"
    assert last["text"].startswith("Slow answer:")


async def test_queueing_while_streaming(tmp_path: Path) -> None:
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=PACED)
    async with served(tmp_path, faux) as client:
        await client.send({"id": "p", "type": "prompt", "message": "SLOW please"})
        await client.event("message_update")
        await client.data({"type": "steer", "message": "steered"})
        busy = await client.request({"type": "prompt", "message": "again"})
        await client.data({"type": "prompt", "message": "later", "streamingBehavior": "followUp"})
        state = await client.data({"type": "get_state"})
        await client.data({"type": "abort"})
    assert busy["success"] is False
    assert busy["error"].startswith("Agent is already processing.")
    assert state["isStreaming"] is True and state["pendingMessageCount"] == 2
    for request_id, queued in (("r1", ["steered"]), ("r3", ["steered"])):
        answer = response_index(client, request_id)
        assert client.lines[answer - 1]["type"] == "queue_update"
        assert client.lines[answer - 1]["steering"] == queued


async def test_a_slow_bash_does_not_hold_up_other_commands(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        await client.send({"id": "b", "type": "bash", "command": "sleep 5; echo never"})
        await trio.sleep(0.2)
        state = await client.data({"type": "get_state"})
        await client.data({"type": "abort_bash"})
        bash = await client.response("b")
    assert state["messageCount"] == 0
    assert response_index(client, "r1") < response_index(client, "b")
    assert bash["data"] == {"output": "", "cancelled": True, "truncated": False}


async def test_delta_updates_stay_linear_for_a_long_stream(tmp_path: Path) -> None:
    count = 20_000
    faux = FauxProvider([FauxReply(text="tok " * count, chunk_size=4)])
    async with served(tmp_path, faux) as client:
        assert await client.data({"type": "set_event_format", "updates": "delta"}) == {
            "updates": "delta"
        }
        start = len(client.raw)
        await client.data({"type": "prompt", "message": "stream"})
        await client.event("agent_settled")
    updates = events_of(client.lines, "message_update")
    deltas = [
        u["assistantMessageEvent"]["delta"]
        for u in updates
        if "delta" in u["assistantMessageEvent"]
    ]
    assert "".join(deltas) == "tok " * count
    assert all(list(u) == ["type", "assistantMessageEvent"] for u in updates)
    # Coalescing may merge deltas under pressure; the bytes stay linear in the text either way.
    assert len(client.raw) - start < 120 * count + 200_000
    [end] = [
        e for e in events_of(client.lines, "message_end") if e["message"]["role"] == "assistant"
    ]
    assert end["message"]["content"][0]["text"] == "tok " * count


async def test_replacing_the_session(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        await client.data({"type": "prompt", "message": "question one"})
        await client.event("agent_settled")
        await client.data({"type": "prompt", "message": "question two"})
        await client.event("agent_settled", 2)
        first = await client.data({"type": "get_state"})
        forks = (await client.data({"type": "get_fork_messages"}))["messages"]
        assert [m["text"] for m in forks] == ["question one", "question two"]
        bad = await client.request({"type": "fork", "entryId": "deadbeef"})
        forked = await client.data({"type": "fork", "entryId": forks[1]["entryId"]})
        after_fork = await client.data({"type": "get_state"})
        cloned = await client.data({"type": "clone"})
        after_clone = await client.data({"type": "get_state"})
        fresh = await client.data({"type": "new_session", "parentSession": first["sessionFile"]})
        after_new = await client.data({"type": "get_state"})
        switched = await client.data(
            {"type": "switch_session", "sessionPath": first["sessionFile"]}
        )
        back = await client.data({"type": "get_state"})
        messages = (await client.data({"type": "get_messages"}))["messages"]
    assert bad["error"] == "Invalid entry ID for forking"
    assert forked == {"text": "question two", "cancelled": False}
    # The leading system message counts (pi 1.6.0): system, question one, its answer.
    assert after_fork["messageCount"] == 3 and after_fork["sessionId"] != first["sessionId"]
    assert cloned == fresh == switched == {"cancelled": False}
    assert after_clone["messageCount"] == 3
    assert after_new["messageCount"] == 0 and after_new["model"]["id"] == "faux-1"
    ids = {s["sessionId"] for s in (first, after_fork, after_clone, after_new)}
    assert len(ids) == 4
    assert back["sessionId"] == first["sessionId"] and back["messageCount"] == 5
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]


async def test_commands_read_before_eof_are_answered(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        await client.send_raw(b'{"id":"a","type":"get_state"}\n{"id":"b","type":"get_messages"}')
        await client.close_stdin()
        await client.wait_until(lambda lines: False, seconds=5)  # until stdout ends
    assert client.stdout_closed
    assert [line.get("id") for line in client.lines] == ["a", "b"]
