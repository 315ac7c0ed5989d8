"""Anthropic message threads (pi 1.6.0): the pure decisions, then the adapter over HTTP."""

from __future__ import annotations

import orjson
import pytest

from pitrio.actors.model_router.providers.anthropic import build_request
from pitrio.actors.model_router.providers.anthropic_threads import (
    MESSAGE_THREADS_BETA,
    OFF,
    ThreadMark,
    ThreadStates,
    classify_rejection,
    plan_request,
    prefix_hash,
    record_reply,
    threads_supported,
)
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages import TextContent, user_message
from pitrio.messages.model import LlmContext, StreamOptions
from tests.actors.providers.loopback import LoopbackServer, json_error, sse
from tests.actors.providers.support import (
    SECRET,
    TOOLS,
    collect,
    final,
    make_model,
    make_provider,
)

API = "anthropic-messages"
THREADED = make_model(API, compat={"supportsMessageThreads": True})
SESSION = "session-1"
CACHED = ProviderSettings()  # short retention: caching on


def _turn(role: str, text: str) -> dict[str, object]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _full(*turns: dict[str, object], system: str = "sys") -> dict[str, object]:
    return {
        "model": "test-model",
        "messages": list(turns),
        "max_tokens": 100,
        "stream": True,
        "system": [{"type": "text", "text": system}],
        "tools": [{"name": "read"}],
    }


# -- the pure decisions ----------------------------------------------------------------------


def test_threads_default_to_anthropics_own_endpoint() -> None:
    assert threads_supported(make_model(API, "https://api.anthropic.com"))
    assert not threads_supported(make_model(API, "https://gateway.example/anthropic"))
    assert threads_supported(make_model(API, compat={"supportsMessageThreads": True}))
    off = make_model(API, "https://api.anthropic.com", compat={"supportsMessageThreads": False})
    assert not threads_supported(off)


def test_first_request_creates_then_a_matching_one_continues_once() -> None:
    states = ThreadStates()
    # As sent, the newest user turn carries the cache marker; a request later it has none.
    marked = {
        "role": "user",
        "content": [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}}],
    }
    first = _full(marked)
    plan = plan_request(states, THREADED, SESSION, first, [MESSAGE_THREADS_BETA])
    assert plan is not None and plan.kind == "create"
    assert plan.body == {**first, "thread": {"type": "create"}}
    reply = _turn("assistant", "first")
    record_reply(states, THREADED, plan, [reply], "msg_1", None)
    mark = states.get(SESSION)
    assert isinstance(mark, ThreadMark) and (mark.prefix_count, mark.reply_id) == (2, "msg_1")
    second = _full(_turn("user", "one"), reply, _turn("user", "two"))
    plan2 = plan_request(states, THREADED, SESSION, second, [MESSAGE_THREADS_BETA])
    assert plan2 is not None and plan2.kind == "continue"
    assert plan2.body == {
        "model": "test-model",
        "messages": [_turn("user", "two")],
        "max_tokens": 100,
        "stream": True,
        "thread": {"type": "continue", "previous_message_id": "msg_1"},
    }
    assert plan2.full is second
    # The mark was used: a concurrent or repeated request starts a new thread.
    assert states.get(SESSION) is None
    again = plan_request(states, THREADED, SESSION, second, [MESSAGE_THREADS_BETA])
    assert again is not None and again.kind == "create"


def test_cache_markers_and_string_content_do_not_change_the_prefix() -> None:
    plain = [_turn("user", "hi")]
    marked = [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"x": 1}}]}
    ]
    as_string = [{"role": "user", "content": "hi"}]
    body = _full()
    hashes = {prefix_hash(THREADED, body, [], turns) for turns in (plain, marked, as_string)}
    assert len(hashes) == 1
    assert prefix_hash(THREADED, body, [], [_turn("user", "ho")]) not in hashes


@pytest.mark.parametrize(
    "change",
    ["system", "tools", "edited history", "betas", "endpoint", "no new message"],
)
def test_a_changed_fixed_setting_or_history_starts_a_new_thread(change: str) -> None:
    states = ThreadStates()
    first = _full(_turn("user", "one"))
    plan = plan_request(states, THREADED, SESSION, first, ["b1"])
    assert plan is not None
    record_reply(states, THREADED, plan, [_turn("assistant", "a")], "msg_1", None)
    turns = [_turn("user", "one"), _turn("assistant", "a"), _turn("user", "two")]
    model, betas, second = THREADED, ["b1"], _full(*turns)
    if change == "system":
        second = _full(*turns, system="other")
    elif change == "tools":
        second["tools"] = [{"name": "write"}]
    elif change == "edited history":
        second = _full(_turn("user", "ONE"), *turns[1:])
    elif change == "betas":
        betas = ["b1", "b2"]
    elif change == "endpoint":
        model = make_model(API, "http://127.0.0.1:10", compat={"supportsMessageThreads": True})
    else:
        second = _full(*turns[:2])
    again = plan_request(states, model, SESSION, second, betas)
    assert again is not None and again.kind == "create"


def test_off_sends_no_thread_and_sessions_are_kept_apart() -> None:
    states = ThreadStates()
    states.set(SESSION, OFF)
    assert plan_request(states, THREADED, SESSION, _full(_turn("user", "x")), []) is None
    other = plan_request(states, THREADED, "session-2", _full(_turn("user", "x")), [])
    assert other is not None and other.kind == "create"
    states.forget(SESSION)
    assert states.get(SESSION) is None


def test_states_keep_the_most_recently_updated_sessions() -> None:
    states = ThreadStates(limit=2)
    states.set("a", OFF)
    states.set("b", OFF)
    states.set("a", OFF)  # a is now the newest
    states.set("c", OFF)
    assert (states.get("a"), states.get("b"), states.get("c")) == (OFF, None, OFF)
    assert len(states) == 2
    states.forget()
    assert len(states) == 0


def test_no_mark_for_a_reply_without_id_or_from_a_fallback_model() -> None:
    states = ThreadStates()
    plan = plan_request(states, THREADED, SESSION, _full(_turn("user", "x")), [])
    assert plan is not None
    record_reply(states, THREADED, plan, [], None, None)
    record_reply(states, THREADED, plan, [], "msg_1", "some-fallback-model")
    assert states.get(SESSION) is None
    record_reply(states, THREADED, plan, [], "msg_1", "test-model")
    assert isinstance(states.get(SESSION), ThreadMark)


def _error(code: str | None, message: str = "no") -> bytes:
    error: dict[str, object] = {"type": "invalid_request_error", "message": message}
    if code is not None:
        error["details"] = {"error_code": code}
    return orjson.dumps({"type": "error", "error": error})


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, _error("thread_not_found"), ("new-thread", "thread_not_found")),
        (409, _error("thread_already_continued"), ("new-thread", "thread_already_continued")),
        (409, _error("thread_continue_in_flight"), ("new-thread", "thread_continue_in_flight")),
        (400, _error("thread_fingerprint_mismatch"), ("new-thread", "thread_fingerprint_mismatch")),
        (400, _error("thread_unsupported_request"), ("unsupported", "thread_unsupported_request")),
        (400, _error(None, "thread: Extra inputs are not permitted"), ("unsupported", "400")),
        (400, _error(None, "prompt is too long"), (None, "400")),
        (400, _error("something_else", "thread"), (None, "something_else")),
        (500, _error(None, "thread"), (None, "500")),
        (400, b"not json but about a thread", ("unsupported", "400")),
    ],
)
def test_rejections(status: int, body: bytes, expected: tuple[str | None, str]) -> None:
    assert classify_rejection(status, body) == expected


def test_request_threads_only_with_caching_and_a_session() -> None:
    context = LlmContext(system_prompt="sys", messages=(user_message("hi", timestamp=1),))

    def request(options: StreamOptions, settings: ProviderSettings = CACHED):  # type: ignore[no-untyped-def]
        return build_request(
            THREADED,
            context,
            options,
            api_key=SECRET,
            headers={},
            settings=settings,
            threads=ThreadStates(),
        )

    threaded = request(StreamOptions(session_id=SESSION))
    assert threaded.json()["thread"] == {"type": "create"}
    assert threaded.headers["anthropic-beta"] == MESSAGE_THREADS_BETA
    for plain in (
        request(StreamOptions()),
        request(StreamOptions(session_id=SESSION, cache_retention="none")),
        request(StreamOptions(session_id=SESSION), ProviderSettings(cache_retention="none")),
    ):
        assert "thread" not in plain.json()
        assert "anthropic-beta" not in plain.headers
    # disableContinuation (cache warming): the beta, but never a thread.
    warm = request(StreamOptions(session_id=SESSION, disable_continuation=True))
    assert "thread" not in warm.json()
    assert warm.headers["anthropic-beta"] == MESSAGE_THREADS_BETA


# -- the adapter over HTTP -------------------------------------------------------------------


def _reply(message_id: str, text: str, model: str = "test-model") -> bytes:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return b"".join(
        f"event: {name}\ndata: ".encode() + orjson.dumps(data) + b"\n\n" for name, data in events
    )


async def _two_turns(
    server: LoopbackServer, pool: HttpPool, *second_replies: object
) -> tuple[object, ...]:
    """Two prompts of one session: the first answered cleanly, the second as scripted."""
    server.push(sse(_reply("msg_1", "first")), *second_replies)  # type: ignore[arg-type]
    model = make_model(API, server.base_url, compat={"supportsMessageThreads": True})
    provider = make_provider(API, pool)
    options = StreamOptions(session_id=SESSION)
    first_user = user_message("one", timestamp=1)
    context = LlmContext(system_prompt="sys", messages=(first_user,), tools=TOOLS)
    reply = final(await collect(provider, model, context, options))
    assert reply.content == (TextContent(text="first"),)
    later = LlmContext(
        system_prompt="sys",
        messages=(first_user, reply, user_message("two", timestamp=3)),
        tools=TOOLS,
    )
    second = final(await collect(provider, model, later, options))
    return provider, model, later, options, second


async def test_second_turn_continues_the_thread(server: LoopbackServer, pool: HttpPool) -> None:
    *_, second = await _two_turns(server, pool, sse(_reply("msg_2", "second")))
    assert second.content == (TextContent(text="second"),)
    first, continued = (request.json() for request in server.requests)
    assert first["thread"] == {"type": "create"}
    assert "system" in first and "tools" in first
    # Only the new user turn, no system or tools, the thread field, the beta header.
    assert continued["thread"] == {"type": "continue", "previous_message_id": "msg_1"}
    assert continued["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert "system" not in continued and "tools" not in continued
    assert server.requests[1].headers["anthropic-beta"] == MESSAGE_THREADS_BETA


async def test_a_reply_from_another_model_is_not_continued(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(sse(_reply("msg_0", "x", model="other")))
    model = make_model(API, server.base_url, compat={"supportsMessageThreads": True})
    provider = make_provider(API, pool)
    options = StreamOptions(session_id=SESSION)
    first = user_message("one", timestamp=1)
    reply = final(
        await collect(provider, model, LlmContext(system_prompt="", messages=(first,)), options)
    )
    server.push(sse(_reply("msg_1", "y")))
    context = LlmContext(system_prompt="", messages=(first, reply, user_message("2", timestamp=2)))
    await collect(provider, model, context, options)
    assert server.requests[1].json()["thread"] == {"type": "create"}


async def test_an_expired_thread_is_resent_as_a_new_one(
    server: LoopbackServer, pool: HttpPool
) -> None:
    gone = json_error(404, orjson.loads(_error("thread_not_found", "expired")))
    provider, model, later, options, second = await _two_turns(
        server, pool, gone, sse(_reply("msg_2", "second"))
    )
    assert second.stop_reason == "stop" and second.content == (TextContent(text="second"),)
    assert [r.json()["thread"]["type"] for r in server.requests] == ["create", "continue", "create"]
    resent = server.requests[2].json()
    assert len(resent["messages"]) == 3 and "system" in resent and "tools" in resent
    assert second.diagnostics is not None
    (diagnostic,) = second.diagnostics
    assert diagnostic.type == "anthropic_thread_fallback"
    assert diagnostic.details == {"reason": "thread_not_found"}
    assert "expired" in (diagnostic.error or {})["message"]
    # The new thread's reply is the one the next request continues.
    server.push(sse(_reply("msg_3", "third")))
    third = LlmContext(
        system_prompt="sys",
        messages=(*later.messages, second, user_message("three", timestamp=5)),
        tools=TOOLS,
    )
    await collect(provider, model, third, options)  # type: ignore[arg-type]
    assert server.requests[3].json()["thread"] == {
        "type": "continue",
        "previous_message_id": "msg_2",
    }


async def test_an_endpoint_without_threads_turns_them_off_for_the_session(
    server: LoopbackServer, pool: HttpPool
) -> None:
    refused = json_error(400, orjson.loads(_error(None, "thread: Extra inputs are not permitted")))
    provider, model, later, options, second = await _two_turns(
        server, pool, refused, sse(_reply("msg_2", "second"))
    )
    assert second.stop_reason == "stop"
    assert second.diagnostics is not None and second.diagnostics[0].details == {"reason": "400"}
    resent = server.requests[2].json()
    assert "thread" not in resent and len(resent["messages"]) == 3
    # Off from now on: no thread field, the beta header still sent.
    server.push(sse(_reply("msg_3", "third")))
    third = LlmContext(
        system_prompt="sys",
        messages=(*later.messages, second, user_message("three", timestamp=5)),  # type: ignore[attr-defined]
        tools=TOOLS,
    )
    await collect(provider, model, third, options)  # type: ignore[arg-type]
    assert "thread" not in server.requests[3].json()
    assert server.requests[3].headers["anthropic-beta"] == MESSAGE_THREADS_BETA
    assert provider.threads.get(SESSION) == OFF  # type: ignore[attr-defined]


async def test_other_errors_stand_and_a_failed_resend_keeps_threads_on(
    server: LoopbackServer, pool: HttpPool
) -> None:
    too_long = json_error(400, orjson.loads(_error(None, "prompt is too long")))
    *_, second = await _two_turns(server, pool, too_long)
    assert second.stop_reason == "error" and "prompt is too long" in (second.error_message or "")
    assert second.diagnostics is None
    assert len(server.requests) == 2  # not resent
    refused = json_error(400, orjson.loads(_error("thread_unsupported_request")))
    server.requests.clear()
    provider2, *_, failed = await _two_turns(server, pool, refused, too_long)
    assert failed.stop_reason == "error"
    assert failed.diagnostics is not None
    assert failed.diagnostics[0].details == {"reason": "thread_unsupported_request"}
    assert len(server.requests) == 3
    assert provider2.threads.get(SESSION) is None  # type: ignore[attr-defined]


def test_reply_turns_are_what_the_next_request_sends() -> None:
    from pitrio.actors.model_router.providers.anthropic import reply_turns
    from pitrio.messages import ToolCall
    from tests.actors.providers.support import assistant

    call = ToolCall(id="call 1", name="read", arguments={"path": "a"})
    reply = assistant(TextContent(text="look"), call, api=API, stop_reason="toolUse")
    model = make_model(API)
    expected_call = {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a"}}
    # The assistant turn only (no placeholder result for the open call), ids as sent.
    assert reply_turns(model, reply, oauth=False) == [
        {"role": "assistant", "content": [{"type": "text", "text": "look"}, expected_call]}
    ]
    # Under an OAuth token the names are Claude Code's, as in the next request's history.
    (turn,) = reply_turns(model, reply, oauth=True)
    assert turn["content"][1]["name"] == "Read"
    empty = assistant(TextContent(text="  "), api=API)
    assert reply_turns(model, empty, oauth=False) == []
