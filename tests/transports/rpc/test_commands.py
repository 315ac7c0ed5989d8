"""The command -> response mapping, without a process: data shapes, key orders, errors."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from pitrio.actors.agent_loop import AgentState, LoopOptions
from pitrio.actors.agent_loop.state import JsonTranscript, TranscriptView
from pitrio.actors.model_router import FAUX_MODELS
from pitrio.actors.session.commands import Accepted, SessionState
from pitrio.actors.session.operations import CycleResult
from pitrio.actors.session.user_bash import BashResult
from pitrio.actors.session_store.projection import ContextMessages
from pitrio.actors.session_store.stored import TailMessageEntry
from pitrio.errors import PitrioError
from pitrio.messages.agent import UserMessage
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent
from pitrio.messages.model import Model
from pitrio.transports.rpc.commands import (
    EVENTFUL_COMMANDS,
    HANDLERS,
    CommandError,
    ScopedModel,
    execute,
)
from pitrio.transports.rpc.events import EntryFormat, UpdateFormat
from pitrio.transports.rpc.protocol import (
    Request,
    StreamedPieces,
    dump_line,
    dump_output,
    parse_record,
)
from pitrio.transports.rpc.shapes import (
    bash_data,
    cycle_model_data,
    fork_messages_data,
    last_text_data,
    state_data,
)

MODELS = {m.id: m for m in FAUX_MODELS}

PI_COMMANDS = {
    "prompt", "steer", "follow_up", "abort", "new_session", "get_state", "get_messages",
    "set_model", "cycle_model", "get_available_models", "set_thinking_level",
    "cycle_thinking_level", "set_steering_mode", "set_follow_up_mode", "compact",
    "set_auto_compaction", "set_auto_retry", "abort_retry", "bash", "abort_bash",
    "get_session_stats", "export_html", "switch_session", "fork", "clone",
    "get_fork_messages", "get_last_assistant_text", "set_session_name", "get_commands",
    # pi 1.6.0's additions
    "clear_queue", "get_available_thinking_levels", "get_entries", "get_tree",
}  # fmt: skip


def agent_state(model: Model, **changes: Any) -> AgentState:
    state = AgentState(
        system_prompt="",
        model=model,
        thinking_level="off",
        tools=(),
        messages=(),
        is_streaming=False,
        streaming_message=None,
        pending_tool_calls=frozenset(),
        error_message=None,
        steering=(),
        follow_up=(),
        options=LoopOptions(),
    )
    return attrs.evolve(state, **changes)


def session_state(**changes: Any) -> SessionState:
    state = SessionState(
        agent=agent_state(MODELS["faux-1"]),
        is_running=False,
        is_retrying=False,
        retry_attempt=0,
        steering=(),
        follow_up=("later",),
        session_id="0190",
        session_file=None,
    )
    return attrs.evolve(state, **changes)


class FakeSession:
    """The part of SessionHandle the handlers use, recording calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.model = MODELS["faux-1"]
        self.level = "off"

    async def submit_with_seq(self, text: str, **kwargs: Any) -> tuple[None, Accepted]:
        self.calls.append(("submit", (text, kwargs)))
        return None, Accepted(41, "queued" if kwargs.get("streaming_behavior") else "started")

    async def steer(self, text: str, images: Any = (), **kwargs: Any) -> str | None:
        self.calls.append(("steer", (text, images)))
        assert kwargs == {"source": "rpc"}
        return None if text == "taken" else "q1"

    async def follow_up(self, text: str, images: Any = (), **kwargs: Any) -> str | None:
        self.calls.append(("follow_up", (text, images)))
        assert kwargs == {"source": "rpc"}
        return None if text == "taken" else "q2"

    async def clear_queue(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        self.calls.append(("clear_queue", None))
        return ("s1",), ("f1", "f2")

    async def available_thinking_levels(self) -> tuple[str, ...]:
        return ("off",) if not self.model.reasoning else ("off", "low", "max")

    async def set_queue_mode(self, kind: str, mode: str) -> None:
        self.calls.append(("queue_mode", (kind, mode)))

    async def set_thinking_level(self, level: str) -> str:
        self.calls.append(("thinking", level))
        self.level = level
        return level

    async def set_model(self, provider: str, model_id: str) -> Model:
        self.model = MODELS[model_id]
        return self.model

    async def state(self) -> SessionState:
        return session_state(agent=agent_state(self.model, thinking_level=self.level))

    async def set_session_name(self, name: str) -> str:
        raise PitrioError("Session name cannot be empty")


@attrs.define
class FakeBackend:
    fake: FakeSession = attrs.field(factory=FakeSession)
    scope: tuple[ScopedModel, ...] = ()
    updates: UpdateFormat = "full"
    entries: EntryFormat = "pi"
    barriers: list[tuple[Any, Any, int]] = attrs.field(factory=list)

    async def session(self) -> FakeSession:
        return self.fake

    def scoped_models(self) -> tuple[ScopedModel, ...]:
        return self.scope

    def set_update_format(self, updates: UpdateFormat) -> None:
        self.updates = updates

    def set_entry_format(self, entries: EntryFormat) -> None:
        self.entries = entries

    def events_before_response(self, request: Request, session: Any, seq: int) -> None:
        self.barriers.append((request.id, session, seq))


async def run(backend: Any, line: str | dict[str, Any]) -> dict[str, Any]:
    request = parse_record(line if isinstance(line, str) else orjson.dumps(line).decode())
    assert isinstance(request, Request)
    return await execute(backend, request)


def test_every_pi_command_has_a_handler() -> None:
    assert set(HANDLERS) == PI_COMMANDS | {"set_event_format", "get_cache_warming"}  # pitrio's


def test_state_data_has_pi_key_order_and_omits_absent_fields() -> None:
    data = state_data(session_state())
    assert list(data) == [
        "model", "thinkingLevel", "isStreaming", "isCompacting", "steeringMode",
        "followUpMode", "sessionId", "autoCompactionEnabled", "messageCount",
        "pendingMessageCount",
    ]  # fmt: skip
    assert data["model"] == to_json(MODELS["faux-1"])
    assert data["pendingMessageCount"] == 1
    named = state_data(session_state(session_file="/s.jsonl", session_name="n", is_running=True))
    assert list(named)[6:9] == ["sessionFile", "sessionId", "sessionName"]
    assert named["isStreaming"] is True


def test_small_data_shapes() -> None:
    assert bash_data(BashResult(output="", cancelled=True, truncated=False)) == {
        "output": "",
        "cancelled": True,
        "truncated": False,
    }
    full = bash_data(
        BashResult(output="x", exit_code=0, cancelled=False, truncated=True, full_output_path="/f")
    )
    assert list(full) == ["output", "exitCode", "cancelled", "truncated", "fullOutputPath"]
    assert cycle_model_data(None) is None
    cycled = cycle_model_data(
        CycleResult(model=MODELS["faux-think"], thinking_level="high", is_scoped=False)
    )
    assert cycled is not None and list(cycled) == ["model", "thinkingLevel", "isScoped"]
    assert last_text_data(None) == {}
    assert last_text_data("hi") == {"text": "hi"}
    assert fork_messages_data([("ab12", "q")]) == {"messages": [{"entryId": "ab12", "text": "q"}]}


async def test_unknown_command_keeps_its_id() -> None:
    assert await run(FakeBackend(), '{"id":7,"type":"frobnicate"}') == {
        "id": 7,
        "type": "response",
        "command": "frobnicate",
        "success": False,
        "error": "Unknown command: frobnicate",
    }


async def test_prompt_fields() -> None:
    backend = FakeBackend()
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    command = {
        "id": "p",
        "type": "prompt",
        "message": "hi",
        "images": [image],
        "streamingBehavior": "steer",
    }
    response = await run(backend, command)
    assert response == {
        "id": "p",
        "type": "response",
        "command": "prompt",
        "success": True,
        "data": {"disposition": "queued"},  # pi 1.6.0: what became of the prompt
    }
    [(_, (text, kwargs))] = backend.fake.calls
    assert text == "hi"
    assert kwargs == {
        "images": (ImageContent(data="AAAA", mime_type="image/png"),),
        "streaming_behavior": "steer",
        "source": "rpc",  # what an extension's input handler sees
    }
    # The seq the acceptance carried is the response's barrier: no second question.
    assert backend.barriers == [("p", backend.fake, 41)]
    bad = await run(backend, '{"id":"p2","type":"prompt"}')
    assert bad["success"] is False and bad["error"] == "prompt: message must be a string"
    bad_image = await run(backend, '{"id":"p3","type":"prompt","message":"x","images":[{}]}')
    assert bad_image["success"] is False and "ImageContent" in bad_image["error"]


async def test_a_started_prompt_says_so() -> None:
    response = await run(FakeBackend(), '{"id":"p","type":"prompt","message":"go"}')
    assert response["data"] == {"disposition": "started"}


@pytest.mark.parametrize("kind", ["steer", "follow_up"])
async def test_steer_and_follow_up_answer_with_their_disposition(kind: str) -> None:
    backend = FakeBackend()
    response = await run(backend, {"id": "q", "type": kind, "message": "later"})
    assert response == {
        "id": "q",
        "type": "response",
        "command": kind,
        "success": True,
        "data": {"disposition": "queued"},
    }
    assert backend.fake.calls == [(kind, ("later", ()))]
    # An extension's input handler took it: nothing queued.
    taken = await run(backend, {"id": "t", "type": kind, "message": "taken"})
    assert taken["data"] == {"disposition": "handled"}


async def test_clear_queue_answers_with_what_it_removed() -> None:
    backend = FakeBackend()
    response = await run(backend, '{"id":"c","type":"clear_queue"}')
    assert response["data"] == {"steering": ["s1"], "followUp": ["f1", "f2"]}
    assert list(response["data"]) == ["steering", "followUp"]
    assert "clear_queue" in EVENTFUL_COMMANDS  # its queue_update is written before it


async def test_available_thinking_levels() -> None:
    backend = FakeBackend()
    response = await run(backend, '{"id":"t","type":"get_available_thinking_levels"}')
    assert response["data"] == {"levels": ["off"]}  # faux-1 does not reason
    backend.fake.model = MODELS["faux-think"]
    response = await run(backend, '{"id":"t","type":"get_available_thinking_levels"}')
    assert response["data"] == {"levels": ["off", "low", "max"]}


async def test_errors_of_the_session_become_failures() -> None:
    response = await run(FakeBackend(), '{"id":"n","type":"set_session_name","name":"  "}')
    assert response == {
        "id": "n",
        "type": "response",
        "command": "set_session_name",
        "success": False,
        "error": "Session name cannot be empty",
    }


async def test_queue_modes_read_like_pi() -> None:
    backend = FakeBackend()
    await run(backend, '{"type":"set_steering_mode","mode":"all"}')
    await run(backend, '{"type":"set_follow_up_mode","mode":"one-at-a-time"}')
    # issue 21: pi stores an unknown mode silently; refused here, naming the value.
    refused = await run(backend, '{"type":"set_follow_up_mode","mode":"whatever"}')
    assert refused["error"] == (
        'set_follow_up_mode: unknown mode "whatever" (use "all" or "one-at-a-time")'
    )
    assert backend.fake.calls == [
        ("queue_mode", ("steering", "all")),
        ("queue_mode", ("followUp", "one-at-a-time")),
    ]


async def test_cycle_model_through_the_scope() -> None:
    scope = (ScopedModel(MODELS["faux-1"]), ScopedModel(MODELS["faux-think"], "high"))
    backend = FakeBackend(scope=scope)
    response = await run(backend, '{"id":"c","type":"cycle_model"}')
    assert response["data"] == {
        "model": to_json(MODELS["faux-think"]),
        "thinkingLevel": "high",
        "isScoped": True,
    }
    again = await run(backend, '{"id":"c","type":"cycle_model"}')
    assert again["data"]["model"]["id"] == "faux-1"
    single = await run(FakeBackend(scope=scope[:1]), '{"id":"c","type":"cycle_model"}')
    assert single["data"] is None


@pytest.mark.parametrize(
    ("updates", "ok"), [("delta", True), ("full", True), ("partial", False), (None, False)]
)
async def test_set_event_format(updates: str | None, ok: bool) -> None:
    backend = FakeBackend()
    command: dict[str, Any] = {"id": 1, "type": "set_event_format"}
    if updates is not None:
        command["updates"] = updates
    response = await run(backend, command)
    assert response["success"] is ok
    if ok:
        assert response["data"] == {"updates": updates}
        assert backend.updates == updates
    elif updates is None:
        assert response["error"] == (
            'set_event_format needs "updates" ("full" or "delta") or "entries"'
        )
        assert backend.updates == "full"
    else:
        assert response["error"].startswith("Unknown event format")
        assert backend.updates == "full"


async def test_a_bug_in_a_handler_is_answered_not_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    class Broken(FakeBackend):
        async def session(self) -> FakeSession:
            raise RuntimeError("boom")

    response = await run(Broken(), '{"id":"x","type":"get_state"}')
    assert response["error"] == "boom" and response["id"] == "x"
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err
    assert "Traceback" not in err  # one line for a user's log (issue 21)


async def test_a_nursery_group_is_answered_with_the_error_inside_it() -> None:
    class Grouped(FakeBackend):
        async def session(self) -> FakeSession:
            raise ExceptionGroup("Exceptions from Trio nursery", [ValueError("the real cause")])

    class GroupedRefusal(FakeBackend):
        async def session(self) -> FakeSession:
            raise BaseExceptionGroup("outer", [ExceptionGroup("inner", [CommandError("no")])])

    response = await run(Grouped(), '{"id":"g","type":"get_state"}')
    assert response["error"] == "the real cause"
    refusal = await run(GroupedRefusal(), '{"id":"h","type":"get_state"}')
    assert refusal["error"] == "no"


@pytest.mark.parametrize(
    ("command", "answer", "updates", "entries"),
    [
        ({"entries": "all"}, {"entries": "all"}, "full", "all"),
        (
            {"entries": "pi", "updates": "delta"},
            {"entries": "pi", "updates": "delta"},
            "delta",
            "pi",
        ),
        ({"entries": "every"}, None, "full", "pi"),
        ({"entries": "all", "updates": "half"}, None, "full", "pi"),
    ],
)
async def test_set_event_format_entries(
    command: dict[str, Any], answer: dict[str, Any] | None, updates: str, entries: str
) -> None:
    backend = FakeBackend()
    response = await run(backend, {"id": 1, "type": "set_event_format", **command})
    assert response["success"] is (answer is not None)
    if answer is not None:
        assert response["data"] == answer
    else:
        assert "format" in response["error"]
    # A refused request applies neither half.
    assert (backend.updates, backend.entries) == (updates, entries)


async def test_get_messages_streamed_or_encoded_beforehand_writes_the_same_line() -> None:
    # The RPC server's writer streams get_messages (issue 38: a resume's peak memory); the
    # daemon's backend, without streams_replies, gets it encoded beforehand. One line either way.

    line = b'{"type":"message","id":"r","parentId":null,"timestamp":"t","message":%s}'
    stored = [
        TailMessageEntry.read(
            "message",
            "r",
            None,
            "t",
            line % b'{"role":"user","content":"caf\\u00e9"}',
            "user",
            1,
            "f",
        )
    ] * 600
    added = tuple(UserMessage(content=f"m{i}", timestamp=i) for i in range(300))
    messages = TranscriptView(ContextMessages(stored, 600), added)

    class Messages(FakeSession):
        async def messages_json(self) -> Any:
            return JsonTranscript(messages)  # type: ignore[arg-type]

    @attrs.define
    class Streaming(FakeBackend):
        streams_replies: bool = True

    request = {"id": "gm", "type": "get_messages"}
    eager = await run(FakeBackend(fake=Messages()), request)
    streamed = await run(Streaming(fake=Messages()), request)
    assert isinstance(streamed["data"].pieces, StreamedPieces)
    assert isinstance(eager["data"].pieces, tuple)
    line = b"".join(dump_output(streamed))
    assert line == dump_line(eager)
    assert orjson.loads(line)["data"]["messages"][0] == {
        "role": "user",
        "content": "café",
    }
    assert len(orjson.loads(line)["data"]["messages"]) == 900


async def test_a_streamed_get_messages_waits_for_the_sessions_earlier_answers() -> None:
    # Streamed, the reply holds the output from its head to its end: it is returned only
    # after one more question to the session (answered in order), so a get_state asked
    # before it is answered, and written, first (a get_state waited behind the whole reply in
    # 3 of 8 starts of the 20,000-turn session without it).

    answer = trio.Event()

    class Slow(FakeSession):
        async def messages_json(self) -> Any:
            return JsonTranscript(())

        async def state(self) -> SessionState:
            await answer.wait()
            return await super().state()

    @attrs.define
    class Streaming(FakeBackend):
        streams_replies: bool = True

    replies: list[dict[str, Any]] = []

    async def ask() -> None:
        replies.append(await run(Streaming(fake=Slow()), {"id": "gm", "type": "get_messages"}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert replies == []  # still waiting for the session's answer
        answer.set()
    assert replies[0]["success"] is True
