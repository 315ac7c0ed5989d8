"""The terminal chat's own ``/`` commands and session picker, without a terminal, and the
in-memory pipe the chat's RPC server talks through."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed

from pitrio.sdk.store import SessionInfo
from pitrio.transports.chat import RpcLink, byte_pipe
from pitrio.transports.chat_commands import (
    CHAT_COMMANDS,
    PICK_MOST,
    fork_rows,
    match_models,
    model_rows,
    parse_command,
    picked,
    session_rows,
    session_text,
)


@pytest.mark.parametrize(
    ("line", "sent"),
    [
        ("/model faux/faux-1", {"type": "set_model", "provider": "faux", "modelId": "faux-1"}),
        ("/model", {"type": "get_state"}),
        ("/thinking high", {"type": "set_thinking_level", "level": "high"}),
        ("/name  my  chat ", {"type": "set_session_name", "name": "my  chat"}),
        ("/new", {"type": "new_session"}),
        ("/compact keep the plan", {"type": "compact", "customInstructions": "keep the plan"}),
        ("/help", {"type": "get_commands"}),
        ("/clone", {"type": "clone"}),
    ],
)
def test_the_chats_commands_are_rpc_commands(line: str, sent: dict[str, str]) -> None:
    parsed = parse_command(line)
    assert parsed is not None and parsed.request == sent


@pytest.mark.parametrize("line", ["hello", "/stats", "/skill:lint", "/greet Ada", " / x"])
def test_other_lines_go_to_the_session(line: str) -> None:
    assert parse_command(line) is None


def test_commands_that_send_nothing() -> None:
    assert parse_command("/quit") == parse_command("/exit")
    assert parse_command("/quit").quit  # type: ignore[union-attr]
    assert parse_command("/resume").resume  # type: ignore[union-attr]
    assert parse_command("/fork").fork  # type: ignore[union-attr]
    fuzzy = parse_command("/model faux-1")  # not provider/id: the models that fit it
    assert fuzzy is not None and fuzzy.request is None and fuzzy.model_query == "faux-1"
    level = parse_command("/thinking loud")
    assert level is not None and level.request is None and "max" in level.text


def test_answers_are_told_in_a_line() -> None:
    model = parse_command("/model")
    assert model is not None and model.show is not None
    shown = model.show({"model": {"provider": "faux", "id": "faux-1"}, "thinkingLevel": "off"})
    assert shown == "model: faux/faux-1 (thinking off)"
    assert parse_command("/session").session_info  # type: ignore[union-attr]
    numbers = {"sessionId": "s1", "userMessages": 2, "tokens": {"input": 7}, "cost": 0.5}
    told = session_text(numbers, None)
    assert "session: s1" in told and "2 user" in told and "7 in" in told and "$0.5000" in told
    assert "(not saved: --no-session)" in told
    warming = {"mode": "idle", "status": "Decision in 4m 30s (...)", "missCost": 1.035}
    block = session_text(numbers, {**warming, "warmCost": 0.090015}).split("\n")[-5:]
    assert block == [
        "Cache Warming",
        "Mode: idle",
        "Status: Decision in 4m 30s (...)",
        "Cache miss penalty: $1.035",
        "Refresh cost: $0.090",
    ]
    inactive = session_text(numbers, {"mode": "off", "status": "Inactive (cache warming disabled)"})
    assert inactive.endswith("Mode: off\nStatus: Inactive (cache warming disabled)")


def _info(name: str | None, first: str, minutes: int) -> SessionInfo:
    stamp = datetime.datetime(2026, 1, 2, 3, minutes, tzinfo=datetime.UTC)
    return SessionInfo(
        path=Path(f"/s/{minutes}.jsonl"),
        id=str(minutes),
        cwd="/w",
        name=name,
        parent_session_path=None,
        created=stamp,
        modified=stamp,
        message_count=minutes,
        first_message=first,
        all_messages_text=first,
    )


def test_the_picker_numbers_sessions_by_name_or_first_prompt() -> None:
    rows = session_rows([_info("named", "ignored", 5), _info(None, "line one\nline two", 4)])
    lines = rows.splitlines()
    assert lines[0].startswith("  1. ") and lines[0].endswith("  5 msgs  named")
    assert lines[1].endswith("  4 msgs  line one line two")
    long = session_rows([_info(None, "x" * 100, 1)] * (PICK_MOST + 5))
    assert len(long.splitlines()) == PICK_MOST
    assert long.splitlines()[0].endswith("x" * 59 + "…")


def test_the_pickers_answers() -> None:
    assert picked("2", 3) == 1
    assert picked(" 1 ", 3) == 0
    assert picked("", 3) is None
    assert picked(None, 3) is None
    assert picked("2\x1b", 3) is None  # Esc cancels
    assert picked("4", 3) == "Enter a number from 1 to 3 (Enter: cancel): "
    assert picked("two", 3) == "Enter a number from 1 to 3 (Enter: cancel): "


async def test_the_pipe_carries_lines_both_ways_and_tells_its_end() -> None:
    to_server, server_in = byte_pipe(2)
    server_out, from_server = byte_pipe(2)
    link = RpcLink(to_server, from_server)
    await link.send_message('{"type":"get_state"}')
    assert await server_in.receive_some(5) == b'{"typ'
    assert await server_in.receive_some() == b'e":"get_state"}\n'
    await server_out.send_all(b'{"a":1}\n{"b"')
    await server_out.send_all(b":2}\n")
    assert await link.get_message() == b'{"a":1}'
    assert await link.get_message() == b'{"b":2}'
    await server_out.aclose()
    with pytest.raises(ConnectionClosed):
        await link.get_message()
    await link.aclose()
    assert await server_in.receive_some() == b""  # the server sees the end of its input
    with pytest.raises(ConnectionClosed):
        await link.send_message("{}")


async def test_a_full_pipe_makes_its_writer_wait() -> None:
    writer, reader = byte_pipe(1)
    await writer.send_all(b"one")
    sent = trio.Event()

    async def second() -> None:
        await writer.send_all(b"two")
        sent.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        assert not sent.is_set()  # waits for room: nothing dropped, nothing grows
        assert await reader.receive_some() == b"one"
        await sent.wait()
    assert await reader.receive_some() == b"two"


MODELS = [
    {"provider": "anthropic", "id": "claude-sonnet-4-5", "name": "Claude Sonnet 4.5"},
    {"provider": "anthropic", "id": "claude-haiku-4-5", "name": "Claude Haiku 4.5"},
    {"provider": "openai", "id": "gpt-5", "name": "GPT-5"},
    {"provider": "openrouter", "id": "anthropic/claude-sonnet-4.5", "name": "Sonnet (OR)"},
]


def test_model_text_is_matched_loosely_best_first() -> None:
    refs = [f"{m['provider']}/{m['id']}" for m in match_models(MODELS, "sonnet")]
    # Both hold "sonnet" as typed; the shorter reference first.
    assert refs == ["anthropic/claude-sonnet-4-5", "openrouter/anthropic/claude-sonnet-4.5"]
    loose = match_models(MODELS, "son45")  # letters in order, not side by side
    assert [m["id"] for m in loose] == ["claude-sonnet-4-5", "anthropic/claude-sonnet-4.5"]
    assert [m["id"] for m in match_models(MODELS, "openai/gpt-5")] == ["gpt-5"]  # exact
    assert [m["id"] for m in match_models(MODELS, "haiku 4.5")] == ["claude-haiku-4-5"]
    assert match_models(MODELS, "llama") == []
    rows = model_rows(MODELS, "openai/gpt-5")
    assert rows.splitlines()[2] == "  3. openai/gpt-5 (current)"


def test_fork_lists_the_newest_prompts_on_a_line_each() -> None:
    messages = [{"entryId": f"e{n}", "text": f"prompt {n}"} for n in range(PICK_MOST + 3)]
    messages[-1]["text"] = "two\nlines " + "x" * 80
    lines = fork_rows(messages).splitlines()
    assert len(lines) == PICK_MOST
    assert lines[0] == "  1. prompt 3"  # the oldest three are not offered
    assert lines[-1].startswith(f"  {PICK_MOST}. two lines xxx") and lines[-1].endswith("…")
    clone = parse_command("/clone")
    assert clone is not None and clone.show is not None
    assert "new session" in clone.show({"cancelled": False})
    assert "kept" in clone.show({"cancelled": True})


def test_tab_knows_every_command_the_chat_parses() -> None:
    for name in CHAT_COMMANDS:
        assert parse_command("/" + name) is not None, name
