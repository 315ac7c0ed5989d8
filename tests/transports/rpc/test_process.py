"""``pitrio --mode rpc`` as a real process over real pipes (pi-rpc.md §1-§7, R1-R34, S188-S205).

Each test starts ``python -m pitrio.transports.cli --mode rpc --model faux/faux-1`` in a
scratch HOME / agent dir / cwd, replies scripted by the fixtures' rules.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from tests.transports.rpc.harness import (
    FIXTURE_SETTINGS,
    Dirs,
    RpcProcess,
    environment,
    events_of,
    rpc_process,
)

# a whole 1x1 PNG: pi 1.6.0 leaves out (with a note) an image it cannot decode
IMAGE = {
    "type": "image",
    "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/"
    "iZk9HQAAAABJRU5ErkJggg==",
    "mimeType": "image/png",
}


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs.make(tmp_path)


def session_lines(path: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines()]


def settings(dirs: Dirs) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads((dirs.agent / "settings.json").read_bytes())
    return value


async def finish(rpc: RpcProcess) -> None:
    """Close stdin; the process must exit 0 with only protocol lines on stdout."""
    await rpc.close_stdin()
    assert await rpc.wait_exit() == 0, rpc.stderr.decode()
    await rpc.wait_until(lambda lines: rpc.stdout_closed, seconds=5)
    # Every stdout line is compact JSON as pi writes it: parses, re-serialises byte for byte.
    raw_lines = bytes(rpc.raw).split(b"\n")
    assert raw_lines[-1] == b""
    for raw in raw_lines[:-1]:
        assert orjson.dumps(orjson.loads(raw)) == raw


# -- framing (§2, S188-S191, R21) ----------------------------------------------------------


async def test_framing_edge_cases(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        await rpc.send_raw(b'{"id":"crlf","type":"get_state"}\r\n')
        assert (await rpc.response("crlf"))["success"] is True

        await rpc.send_raw(b"\n")
        await rpc.send_raw(b'{"id":"bad","type":"get_state"\n')
        await rpc.send_raw(b"[1,2]\n")
        await rpc.send_raw(b'{"id":"u1","type":"no_such_command"}\n')
        await rpc.send_raw(b'{"id":42,"type":"get_state","extra":{"ignored":true}}\n')
        assert (await rpc.response(42))["success"] is True
        errors = [line for line in rpc.lines if line.get("success") is False]
        assert errors[0] == {
            "type": "response",
            "command": "parse",
            "success": False,
            "error": "Failed to parse command: Unexpected end of JSON input",
        }
        assert list(errors[1]) == ["type", "command", "success", "error"]
        assert errors[1]["command"] == "parse"
        assert errors[1]["error"].startswith("Failed to parse command: ")
        assert errors[2] == {
            "type": "response",
            "success": False,
            "error": "Unknown command: undefined",
        }
        assert errors[3] == {  # pi drops this id; pitrio keeps it (documented)
            "id": "u1",
            "type": "response",
            "command": "no_such_command",
            "success": False,
            "error": "Unknown command: no_such_command",
        }

        # A UTF-8 character split across writes, and U+2028 (not a line break) in a string.
        await rpc.send_raw(b'{"id":"n","type":"set_session_name","name":"caf\xc3')
        await trio.sleep(0.05)
        await rpc.send_raw(b"\xa9 \xe2\x80")
        await trio.sleep(0.05)
        await rpc.send_raw(b'\xa8 x"}\n')
        assert (await rpc.response("n"))["success"] is True
        changed = await rpc.event("session_info_changed")
        assert changed["name"] == "caf\u00e9 \u2028 x"
        assert 'caf\u00e9 \u2028 x"'.encode() in rpc.raw  # raw, not escaped

        # A 10 MB record.
        pad = "x" * (10 * 1024 * 1024)
        await rpc.send_raw(orjson.dumps({"id": "big", "type": "get_state", "pad": pad}) + b"\n")
        assert (await rpc.response("big", seconds=30))["data"][
            "sessionName"
        ] == "caf\u00e9 \u2028 x"

        # The last record has no LF: it is still read at EOF.
        await rpc.send_raw(b'{"id":"last","type":"get_messages"}')
        await finish(rpc)
    assert rpc.responses["last"]["data"] == {"messages": []}


def long_session_file(path: Path, cwd: Path, turns: int) -> list[dict[str, Any]]:
    """Write a session file of ``turns`` user/assistant pairs; returns its messages."""
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": "long-session",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": str(cwd),
        }
    ]
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        for role, text in (
            ("user", f"question {turn} caf\u00e9"),
            ("assistant", f"answer {turn} \u2028 \u00fc"),
        ):
            message: dict[str, Any] = {
                "role": role,
                "content": [{"type": "text", "text": text}],
                "timestamp": 1767225600000 + turn,
            }
            if role == "assistant":
                message.update(
                    api="faux",
                    provider="faux",
                    model="faux-1",
                    stopReason="stop",
                    usage={
                        "input": 10,
                        "output": 2,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "totalTokens": 12,
                        "cost": {
                            "input": 0,
                            "output": 0,
                            "cacheRead": 0,
                            "cacheWrite": 0,
                            "total": 0,
                        },
                    },
                )
            messages.append(message)
            lines.append(
                {
                    "type": "message",
                    "id": f"{len(lines):08x}",
                    "parentId": lines[-1].get("id") if len(lines) > 1 else None,
                    "timestamp": "2026-01-01T00:00:01.000Z",
                    "message": message,
                }
            )
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return messages


async def test_a_long_transcript_is_one_line_amid_a_streaming_run(dirs: Dirs) -> None:
    # get_messages of 10,000 messages is encoded and written in pieces (issue 7): still one
    # line, the stored messages exactly, not interleaved with the run's events.
    path = dirs.root / "long.jsonl"
    stored = long_session_file(path, dirs.cwd, 5000)  # a 2 MB line: more than the pipe holds
    async with rpc_process(dirs, "--session", str(path)) as rpc:
        await rpc.send_raw(
            b'{"id":"gm","type":"get_messages"}\n'
            b'{"id":"p","type":"prompt","message":"SLOW: stream while the answer is written"}\n'
            b'{"id":"gs","type":"get_state"}\n'
        )
        await rpc.event("agent_settled")
        messages = (await rpc.response("gm"))["data"]["messages"]
        assert messages[: len(stored)] == stored
        assert (await rpc.response("gs"))["success"]
        await finish(rpc)  # every line parses and is compact JSON
    assert len(messages) in (len(stored), len(stored) + 1)  # the prompt may come first


# -- prompting (§4.3, §5.1, R1-R7, R34) ----------------------------------------------------


async def test_prompting_and_queues(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        # R6 / R5: queued while idle, delivered in the next run (steer right after the prompt).
        assert (await rpc.request({"type": "steer", "message": "steered"}))["success"]
        assert (await rpc.request({"type": "follow_up", "message": "followed"}))["success"]
        assert (await rpc.data({"type": "get_state"}))["pendingMessageCount"] == 2
        queue = events_of(rpc.lines, "queue_update")
        assert [q["steering"] for q in queue] == [["steered"], ["steered"]]
        assert [q["followUp"] for q in queue] == [[], ["followed"]]

        response = await rpc.request({"type": "prompt", "message": "hi", "images": [IMAGE]})
        assert response == {
            "id": "r4",
            "type": "response",
            "command": "prompt",
            "success": True,
            "data": {"disposition": "started"},  # pi 1.6.0
        }
        await rpc.event("agent_settled")
        users = [
            e["message"]["content"]
            for e in events_of(rpc.lines, "message_start")
            if e["message"]["role"] == "user"
        ]
        assert users == [
            [{"type": "text", "text": "hi"}, IMAGE],  # R34: text first, then the images
            [{"type": "text", "text": "steered"}],
            [{"type": "text", "text": "followed"}],
        ]
        assert len(events_of(rpc.lines, "agent_end")) == 1
        answer = rpc.lines.index(response)
        assert rpc.lines[answer + 1] == {"type": "agent_start"}

        # Errors: no message, an image that is not one; abort and abort_retry while idle.
        missing = await rpc.request({"type": "prompt"})
        assert missing["success"] is False and missing["id"] == "r5"
        bad_image = await rpc.request({"type": "prompt", "message": "x", "images": [{}]})
        assert bad_image["success"] is False
        assert (await rpc.request({"type": "steer"}))["success"] is False
        assert (await rpc.request({"type": "abort"}))["success"] is True
        assert (await rpc.request({"type": "abort_retry"}))["success"] is True

        # The delta format, then a reply streamed in it.
        await rpc.data({"type": "set_event_format", "updates": "delta"})
        bad_format = await rpc.request({"type": "set_event_format", "updates": "compact"})
        assert bad_format["success"] is False
        before = len(rpc.by_type["message_update"])
        await rpc.data({"type": "prompt", "message": "Hello there"})
        await rpc.event("agent_settled", 2)
        updates = rpc.by_type["message_update"][before:]
        assert all("partial" not in u["assistantMessageEvent"] for u in updates)
        assert all("message" not in u for u in updates)
        text = "".join(u["assistantMessageEvent"].get("delta", "") for u in updates)
        assert text == "You said: Hello there"
        await finish(rpc)


async def test_busy_abort_and_follow_ups_survive(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        await rpc.send({"id": "p", "type": "prompt", "message": "SLOW: long"})
        await rpc.event("message_update", 2)
        busy = await rpc.request({"type": "prompt", "message": "again"})
        assert busy["error"] == (
            "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') "
            "to queue the message."
        )
        await rpc.data({"type": "follow_up", "message": "kept"})
        await rpc.data({"type": "abort"})
        # R7: the run ends (aborted) before the abort's response; the follow-up waits.
        answer = rpc.lines.index(rpc.responses["r3"])
        assert [line["type"] for line in rpc.lines[answer - 2 : answer]] == [
            "agent_end",
            "agent_settled",
        ]
        ends = [
            e for e in events_of(rpc.lines, "message_end") if e["message"]["role"] == "assistant"
        ]
        assert ends[-1]["message"]["stopReason"] == "aborted"
        assert ends[-1]["message"]["errorMessage"] == "Request was aborted"
        state = await rpc.data({"type": "get_state"})
        assert state["pendingMessageCount"] == 1 and state["isStreaming"] is False
        await finish(rpc)


# -- state, models, settings (§5.2-§5.5, R20, R33, S192, S198-S200) -------------------------


async def test_state_models_and_settings(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        state = await rpc.data({"type": "get_state"})
        assert list(state) == [
            "model", "thinkingLevel", "isStreaming", "isCompacting", "steeringMode",
            "followUpMode", "sessionFile", "sessionId", "autoCompactionEnabled",
            "messageCount", "pendingMessageCount",
        ]  # fmt: skip
        assert (state["model"]["provider"], state["model"]["id"]) == ("faux", "faux-1")
        assert (state["isStreaming"], state["messageCount"]) == (False, 0)

        models = (await rpc.data({"type": "get_available_models"}))["models"]
        assert [m["id"] for m in models] == ["faux-1", "faux-think", "faux-small"]
        assert all(m["contextWindow"] > 0 and isinstance(m["reasoning"], bool) for m in models)

        assert await rpc.data({"type": "cycle_thinking_level"}) is None
        missing = await rpc.request({"type": "set_model", "provider": "faux", "modelId": "nope"})
        assert missing["error"] == "Model not found: faux/nope"
        think = await rpc.data({"type": "set_model", "provider": "faux", "modelId": "faux-think"})
        assert think["id"] == "faux-think"
        # pi 1.6.0: without a default in the settings the session's level stays ("off" after
        # faux-1, which does not reason), so the switch changes nothing.
        assert (await rpc.data({"type": "get_state"}))["thinkingLevel"] == "off"
        assert events_of(rpc.lines, "thinking_level_changed") == []
        # "max" is clamped to the nearest level faux-think has (it used to become "off").
        await rpc.data({"type": "set_thinking_level", "level": "max"})
        assert (await rpc.data({"type": "get_state"}))["thinkingLevel"] == "high"
        levels = await rpc.data({"type": "get_available_thinking_levels"})
        assert levels == {"levels": ["off", "minimal", "low", "medium", "high"]}
        cycled = await rpc.data({"type": "cycle_thinking_level"})
        assert cycled == {"level": "off"}  # high was the last: around to the first
        await rpc.data({"type": "set_thinking_level", "level": "low"})
        model = await rpc.data({"type": "cycle_model"})
        assert (model["model"]["id"], model["isScoped"]) == ("faux-small", False)
        assert model["thinkingLevel"] == "off"
        assert await rpc.data({"type": "get_available_thinking_levels"}) == {"levels": ["off"]}
        assert [e["level"] for e in events_of(rpc.lines, "thinking_level_changed")] == [
            "high",
            "off",
            "low",
            "off",
        ]

        await rpc.data({"type": "set_steering_mode", "mode": "all"})
        await rpc.data({"type": "set_follow_up_mode", "mode": "all"})
        await rpc.data({"type": "set_auto_compaction", "enabled": False})
        await rpc.data({"type": "set_auto_retry", "enabled": False})
        state = await rpc.data({"type": "get_state"})
        assert (state["steeringMode"], state["followUpMode"]) == ("all", "all")
        assert state["autoCompactionEnabled"] is False
        await finish(rpc)
    saved = settings(dirs)
    assert (saved["steeringMode"], saved["followUpMode"]) == ("all", "all")
    assert saved["compaction"]["enabled"] is False and saved["retry"]["enabled"] is False
    # pi 1.6.0: model and thinking choices over RPC stay in the session.
    assert not {"defaultProvider", "defaultModel", "defaultThinkingLevel"} & set(saved)


async def test_models_scope(dirs: Dirs) -> None:
    async with rpc_process(dirs, "--models", "faux/faux-1,faux/faux-think:low,nope/x") as rpc:
        first = await rpc.data({"type": "cycle_model"})
        second = await rpc.data({"type": "cycle_model"})
        await finish(rpc)
    assert (first["model"]["id"], first["thinkingLevel"], first["isScoped"]) == (
        "faux-think",
        "low",
        True,
    )
    assert second["model"]["id"] == "faux-1"
    assert b"--models nope/x" in rpc.stderr


async def test_a_database_in_the_settings_is_named_as_unused_here(tmp_path: Path) -> None:
    # session.store is pitrio serve's: RPC mode says it keeps this session in a file instead,
    # and does so; with --no-session there is nothing to say.
    store = "postgresql://nobody@127.0.0.1:9/none"
    dirs = Dirs.make(tmp_path, settings={"session": {"store": store}})
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "prompt", "message": "hello"})
        await rpc.wait_until(lambda lines: bool(events_of(lines, "agent_settled")))
        state = await rpc.data({"type": "get_state"})
        await finish(rpc)
    assert b"session.store setting is used by pitrio serve only" in rpc.stderr
    assert await trio.Path(state["sessionFile"]).is_file()
    async with rpc_process(dirs, "--no-session") as quiet:
        await finish(quiet)
    assert b"session.store" not in quiet.stderr


# -- session commands (§5.7-§5.8, R14, R18, R19, R28-R30, S193-S194, S201-S205) --------------


async def test_session_commands(tmp_path: Path) -> None:
    # Keep one token, so the one exchange is split and its prompt summarized: pi 1.6.0 refuses
    # to compact a branch that fits the kept budget (its system message is no history).
    settings = {**FIXTURE_SETTINGS, "compaction": {"keepRecentTokens": 1}}
    dirs = Dirs.make(tmp_path, settings=settings)
    template = dirs.agent / "prompts" / "review.md"
    template.parent.mkdir()
    template.write_text("---\ndescription: Review the code\n---\nReview $@\n")
    async with rpc_process(dirs) as rpc:
        assert await rpc.data({"type": "get_last_assistant_text"}) == {}
        blank = await rpc.request({"type": "set_session_name", "name": "  "})
        assert blank["error"] == "Session name cannot be empty"
        empty = await rpc.request({"type": "export_html"})
        assert empty["error"] == "Nothing to export yet - start a conversation first"
        commands = (await rpc.data({"type": "get_commands"}))["commands"]
        assert [(c["name"], c["description"], c["source"]) for c in commands] == [
            ("review", "Review the code", "prompt")
        ]

        await rpc.data({"type": "prompt", "message": "Session demo: one."})
        await rpc.event("agent_settled")
        stats = await rpc.data({"type": "get_session_stats"})
        # totalMessages counts the leading system message too (pi 1.6.0).
        assert (stats["userMessages"], stats["assistantMessages"], stats["totalMessages"]) == (
            1,
            1,
            3,
        )
        assert stats["sessionFile"] and stats["sessionId"] and stats["contextUsage"]["tokens"] > 0
        last = await rpc.data({"type": "get_last_assistant_text"})
        assert last == {"text": "You said: Session demo: one."}
        await rpc.data({"type": "set_session_name", "name": " demo "})
        exported = await rpc.data({"type": "export_html", "outputPath": str(dirs.root / "s.html")})
        assert exported["path"].endswith(".html") and await trio.Path(exported["path"]).exists()

        # A turn past the kept budget, so the first one is summarized (pi 1.6.0: the system
        # message alone is nothing to compact).
        await rpc.data({"type": "prompt", "message": "x" * 90_000})
        await rpc.event("agent_settled", 2)
        compacted = await rpc.data({"type": "compact"})
        assert compacted["summary"] and compacted["tokensBefore"] > 0
        again = await rpc.request({"type": "compact"})
        assert again["error"] == "Already compacted"
        compaction_ends = events_of(rpc.lines, "compaction_end")
        assert compaction_ends[-1]["errorMessage"] == "Compaction failed: Already compacted"
        assert "result" not in compaction_ends[-1]
        stats = await rpc.data({"type": "get_session_stats"})
        assert stats["contextUsage"]["tokens"] is None  # R15: unknown until the next reply

        state = await rpc.data({"type": "get_state"})
        first_file = state["sessionFile"]
        assert state["sessionName"] == "demo"
        forks = (await rpc.data({"type": "get_fork_messages"}))["messages"]
        assert [m["text"] for m in forks] == ["Session demo: one.", "x" * 90_000]
        forked = await rpc.data({"type": "fork", "entryId": forks[0]["entryId"]})
        assert forked == {"text": "Session demo: one.", "cancelled": False}
        # The fork keeps what came before the first prompt: the system message (pi 1.6.0).
        assert (await rpc.data({"type": "get_state"}))["messageCount"] == 1
        bad = await rpc.request({"type": "fork", "entryId": "deadbeef"})
        assert bad["error"] == "Invalid entry ID for forking"
        fresh = await rpc.data({"type": "new_session", "parentSession": first_file})
        assert fresh == {"cancelled": False}
        await rpc.data({"type": "prompt", "message": "Session demo: two."})
        await rpc.event("agent_settled", 3)
        new_file = (await rpc.data({"type": "get_state"}))["sessionFile"]
        assert await rpc.data({"type": "clone"}) == {"cancelled": False}
        cloned = await rpc.data({"type": "get_state"})
        # system, user, assistant (pi 1.6.0 counts the system message)
        assert cloned["sessionFile"] != new_file and cloned["messageCount"] == 3

        nowhere = str(dirs.root / "elsewhere" / "new.jsonl")
        await rpc.data({"type": "switch_session", "sessionPath": nowhere})
        elsewhere = await rpc.data({"type": "get_state"})
        assert (elsewhere["sessionFile"], elsewhere["messageCount"]) == (nowhere, 0)
        await rpc.data({"type": "switch_session", "sessionPath": first_file})
        back = await rpc.data({"type": "get_state"})
        assert back["sessionFile"] == first_file and back["sessionName"] == "demo"
        missing = await rpc.request({"type": "switch_session"})
        assert missing["success"] is False
        await finish(rpc)
    lines = session_lines(first_file)
    assert lines[0]["type"] == "session"
    assert [e["name"] for e in lines if e["type"] == "session_info"] == ["demo"]
    assert sum(e["type"] == "compaction" for e in lines) == 1
    assert session_lines(new_file)[0]["parentSession"] == first_file


# -- bash (§5.6, R22, R23, S195-S197) -------------------------------------------------------


async def test_bash(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        hello = await rpc.data({"type": "bash", "command": "echo hello; echo oops >&2"})
        assert hello == {
            "output": "hello\noops\n",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
        }
        failed = await rpc.data({"type": "bash", "command": "exit 4"})
        assert (failed["exitCode"], failed["output"]) == (4, "")
        assert (await rpc.request({"type": "bash"}))["success"] is False

        # R22: a long command does not hold up get_state; abort_bash cancels it.
        await rpc.send({"id": "slow", "type": "bash", "command": "sleep 5; echo never"})
        await trio.sleep(0.2)
        state = await rpc.request({"type": "get_state"})
        assert "slow" not in rpc.responses
        await rpc.data({"type": "abort_bash"})
        cancelled = await rpc.response("slow")
        assert rpc.lines.index(state) < rpc.lines.index(cancelled)
        assert cancelled["data"] == {"output": "", "cancelled": True, "truncated": False}
        assert (await rpc.request({"type": "abort_bash"}))["success"] is True

        # R23: no events for a user command; the next request's context has it.
        assert not any(line["type"] in ("agent_start", "message_start") for line in rpc.lines)
        messages = (await rpc.data({"type": "get_messages"}))["messages"]
        assert [m["role"] for m in messages] == ["bashExecution"] * 3
        await finish(rpc)


# -- process behaviour (§1, §7, R31) ----------------------------------------------------------


async def test_eof_during_a_run_exits_zero_at_once(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        await rpc.send({"id": "p", "type": "prompt", "message": "SLOW: long"})
        await rpc.event("message_update", 2)
        started = trio.current_time()
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0
        assert trio.current_time() - started < 3
    assert not events_of(rpc.lines, "agent_end")  # pi abandons the run silently
    [session] = [p for p in (dirs.agent / "sessions").rglob("*.jsonl")]
    roles = [e["message"]["role"] for e in session_lines(str(session)) if e["type"] == "message"]
    assert roles[:2] == ["system", "user"]  # flushed on the way out


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
async def test_signals_end_everything(dirs: Dirs, signum: int, code: int) -> None:
    pid_file = dirs.root / "child.pid"
    async with rpc_process(dirs) as rpc:
        await rpc.send({"id": "p", "type": "prompt", "message": "SLOW: long"})
        await rpc.send({"id": "b", "type": "bash", "command": f"echo $$ > {pid_file}; sleep 30"})
        with trio.fail_after(10):
            # Polling: the file is written by another process.
            while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
                await trio.sleep(0.02)
        child = int(pid_file.read_text())
        rpc.process.send_signal(signum)
        assert await rpc.wait_exit() == code
    with trio.fail_after(5):
        while _alive(child):  # noqa: ASYNC110 (another process's life: nothing to wait on)
            await trio.sleep(0.02)


@pytest.mark.parametrize("busy", [False, True])
async def test_sigint_kills_it_as_pi_after_a_clean_shutdown(dirs: Dirs, busy: bool) -> None:
    """SIGINT (idle, or mid-stream): the process dies of the signal as pi's does, after the
    session was flushed, and says nothing on stderr (no KeyboardInterrupt, no group)."""
    async with rpc_process(dirs) as rpc:
        if busy:
            await rpc.data({"type": "prompt", "message": "SLOW: interrupted"})
            await rpc.event("message_update")
        else:
            await rpc.data({"type": "get_state"})
        rpc.process.send_signal(signal.SIGINT)
        assert await rpc.wait_exit() == -signal.SIGINT
    assert rpc.stderr == b""
    sessions = list((dirs.agent / "sessions").rglob("*.jsonl"))
    if busy:
        [session] = sessions
        roles = [e["message"]["role"] for e in session_lines(str(session)) if "message" in e]
        assert roles[:2] == ["system", "user"]  # flushed on the way out
    else:
        assert sessions == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--model", "nope/nothing"), {}, b"Error: "),
        (("@notes.txt",), {}, b"Error: @file arguments are not supported in RPC mode"),
        (("--no-such-flag",), {}, b"Error: unrecognized arguments"),
        ((), {"PITRIO_FAUX_SCRIPT": "bogus"}, b"Error: PITRIO_FAUX_SCRIPT"),
        (("--session", "/nonexistent/dir/x.jsonl", "--continue"), {}, b"Error: "),
        (("-e", "missing_ext.py"), {}, b"Error: Failed to load extension "),
    ],
)
def test_start_up_errors(
    dirs: Dirs, args: tuple[str, ...], env: dict[str, str], message: bytes
) -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", "--mode", "rpc", *args],
        cwd=dirs.cwd,
        env=environment(dirs, env),
        input=b'{"type":"get_state"}\n',
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == b""
    assert message in result.stderr


async def test_stray_output_goes_to_stderr(dirs: Dirs) -> None:
    # A library that prints (and writes to fd 1) once RPC mode runs.
    site = dirs.root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, threading, time\n"
        "def _stray():\n"
        "    # Once RPC mode took stdout over (fd 1 is then a copy of fd 2).\n"
        "    while os.stat(1) != os.stat(2):\n"
        "        time.sleep(0.01)\n"
        "    print('stray print', flush=True)\n"
        "    os.write(1, b'stray fd write\\n')\n"
        "threading.Thread(target=_stray, daemon=True).start()\n"
    )
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    async with rpc_process(dirs, env={"PYTHONPATH": path}) as rpc:
        await rpc.data({"type": "get_state"})
        with trio.fail_after(10):
            while b"stray fd write" not in rpc.stderr:  # noqa: ASYNC110 (another process)
                await trio.sleep(0.02)
        await rpc.data({"type": "get_state"})
        await finish(rpc)
    assert b"stray print" not in rpc.raw and b"stray fd" not in rpc.raw
    assert b"stray print" in rpc.stderr and b"stray fd write" in rpc.stderr


SCOPE_AND_SHUTDOWN = """
import json


def setup(api):
    async def scope(args, ctx):
        with open(args, "w") as out:
            json.dump([[m.model.ref, m.thinking_level] for m in ctx.scoped_models], out)

    async def bye(args, ctx):
        ctx.shutdown()

    api.register_command("scope", scope)
    api.register_command("bye", bye)
"""


async def test_an_extension_sees_the_scope_and_can_shut_the_process_down(dirs: Dirs) -> None:
    """pi 1.6.0's ``ctx.scopedModels`` and ``ctx.shutdown()`` in RPC mode: the scope is the
    ``--models`` one, and after ``shutdown()`` the process ends once its last command is
    answered and the session idle, as at the end of its input (exit 0, stdin still open)."""
    extension = dirs.root / "scope_ext.py"
    extension.write_text(SCOPE_AND_SHUTDOWN)
    written = dirs.root / "scope.json"
    args = ("-e", str(extension), "--models", "faux/faux-1,faux/faux-think:low")
    async with rpc_process(dirs, *args) as rpc:
        await rpc.data({"type": "prompt", "message": f"/scope {written}"})
        answer = await rpc.data({"type": "prompt", "message": "/bye"})
        code = await rpc.wait_exit()
    assert answer == {"disposition": "handled"}  # answered before the process ends
    assert code == 0, rpc.stderr.decode()
    assert orjson.loads(written.read_bytes()) == [["faux/faux-1", None], ["faux/faux-think", "low"]]


def test_a_start_runs_without_the_collector_and_what_it_made_is_frozen() -> None:
    # Issue 38: no collection walks a resumed file's entries between the read and the first
    # reply; what the start made is out of the collector's sight once it succeeded.
    import gc

    from pitrio.sdk.session import collector_paused

    enabled = gc.isenabled()
    gc.enable()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused(freeze=True):
            assert not gc.isenabled()
            made = [[index] for index in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(made)
        with pytest.raises(RuntimeError), collector_paused(freeze=True):
            raise RuntimeError("the start failed")
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        if not enabled:
            gc.disable()
