"""Threaded and OAuth Anthropic requests built incrementally (issue 38): the same bytes and the
same thread decisions as the whole-transcript build and the old fingerprint, at a cost of the
new turns only."""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson
import pytest

from pitrio.actors.model_router.providers import anthropic_plain, anthropic_threads, anthropic_turns
from pitrio.actors.model_router.providers.anthropic import (
    CLAUDE_CODE_IDENTITY,
    AnthropicRequest,
    build_body,
    build_messages,
    build_request,
    reply_turns,
)
from pitrio.actors.model_router.providers.anthropic_plain import PlainTurns
from pitrio.actors.model_router.providers.anthropic_threads import (
    ThreadStates,
    chain_of,
    plan_request,
    record_reply,
)
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.claude_code import claude_code_body
from pitrio.actors.model_router.providers.convert import JoinedList, body_bytes, encode_json_pieces
from pitrio.messages import TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.agent import AssistantMessage, LlmMessage, UserMessage
from pitrio.messages.model import LlmContext, Model, StreamOptions, ToolSpec
from tests.actors.providers.support import TOOLS, assistant, make_model, tool_result

API = "anthropic-messages"
THREADED = make_model(API, compat={"supportsMessageThreads": True})
OAUTH = "sk-ant-oat01-0123456789"
EPHEMERAL = {"type": "ephemeral"}
OWN_TOOL = ToolSpec(name="my_lookup", description="Look up", parameters={"type": "object"})


# -- the old fingerprint and plan, kept here as they were (the reference) ----------------------


def _old_normalized(value: Any) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "cache_control":
                continue
            if key == "content" and isinstance(item, str):
                out[key] = [{"type": "text", "text": item}]
            else:
                out[key] = _old_normalized(item)
        return out
    if isinstance(value, list | tuple):
        return [_old_normalized(item) for item in value]
    return value


_FIXED = ("model", "system", "tools", "thinking", "output_config", "tool_choice")


def _old_prefix_hash(
    model: Model, body: Mapping[str, Any], betas: Sequence[str], messages: Sequence[Any]
) -> str:
    fixed = [model.provider, model.base_url, *(body.get(key) for key in _FIXED)]
    fixed += [list(betas), body.get("fallbacks")]
    digest = hashlib.sha256(orjson.dumps(fixed, option=orjson.OPT_SORT_KEYS))
    digest.update(b"\x00")
    digest.update(orjson.dumps(_old_normalized(list(messages)), option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()[:32]


class OldThreads:
    """The old plan_request/record_reply over the old fingerprint, one session."""

    def __init__(self) -> None:
        self.mark: tuple[int, str, str] | None = None

    def plan(self, model: Model, full: dict[str, Any], betas: Sequence[str]) -> dict[str, Any]:
        messages = full["messages"]
        mark, self.mark = self.mark, None
        if (
            mark is not None
            and len(messages) > mark[0]
            and _old_prefix_hash(model, full, betas, messages[: mark[0]]) == mark[1]
        ):
            body = {key: value for key, value in full.items() if key not in ("system", "tools")}
            body["messages"] = messages[mark[0] :]
            body["thread"] = {"type": "continue", "previous_message_id": mark[2]}
            return body
        return {**full, "thread": {"type": "create"}}

    def record(
        self, model: Model, full: dict[str, Any], betas: Sequence[str], turns: list[Any], rid: str
    ) -> None:
        prefix = [*full["messages"], *turns]
        self.mark = (len(prefix), _old_prefix_hash(model, full, betas, prefix), rid)


def _old_full(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    settings: ProviderSettings,
    oauth: bool,
    system_first: list[Any],
) -> dict[str, Any]:
    # The typed whole-transcript build, as build_request made it before (plain, renamed).
    body = build_body(model, context, options, settings)
    if oauth:
        body = claude_code_body(body)
        body["system"] = [*system_first, *body.get("system", [])]
    return body


# -- the fingerprint's decisions against the old one -------------------------------------------


def _turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _full(*turns: dict[str, Any], system: str = "sys", **more: Any) -> dict[str, Any]:
    return {
        "model": "test-model",
        "messages": list(turns),
        "max_tokens": 100,
        "stream": True,
        "system": [{"type": "text", "text": system}],
        "tools": [{"name": "read"}],
        **more,
    }


def _decide(
    first: dict[str, Any],
    reply: list[Any],
    second: dict[str, Any],
    betas: tuple[list[str], list[str]] = (["b"], ["b"]),
    models: tuple[Model, Model] = (THREADED, THREADED),
) -> tuple[str, str]:
    """The second request's kind, new fingerprint and old."""
    states = ThreadStates()
    plan = plan_request(states, models[0], "s", first, betas[0])
    assert plan is not None
    record_reply(states, models[0], plan, reply, "msg_1", None)
    second_plan = plan_request(states, models[1], "s", second, betas[1])
    assert second_plan is not None
    old = OldThreads()
    old.plan(models[0], first, betas[0])
    old.record(models[0], first, betas[0], reply, "msg_1")
    old_body = old.plan(models[1], second, betas[1])
    assert (second_plan.body == old_body) == (old_body["thread"]["type"] == second_plan.kind)
    return second_plan.kind, old_body["thread"]["type"]


def _mutations() -> list[tuple[str, Any]]:
    one = _turn("user", "one")
    marked = {
        "role": "user",
        "content": [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}}],
    }
    call = {"type": "tool_use", "id": "c1", "name": "read", "input": {"n": 1, "a": [1, 2]}}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "a"}, call]}
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]}
    rest = [reply, results, _turn("user", "two")]

    def case(first_turns: list[Any], second_turns: list[Any], **kw: Any) -> Any:
        return (_full(*first_turns), [reply], _full(*second_turns, **kw))

    reordered = {"content": [{"text": "one", "type": "text"}], "role": "user"}
    as_float = copy.deepcopy(reply)
    as_float["content"][1]["input"]["n"] = 1.0
    keys = copy.deepcopy(reply)
    keys["content"][1]["input"] = {"a": [1, 2], "n": 1}
    return [
        ("same", case([one], [one, *rest])),
        ("cache mark moved", case([marked], [one, *rest])),
        ("cache mark added", case([one], [marked, *rest])),
        ("string content", case([one], [{"role": "user", "content": "one"}, *rest])),
        ("string in first", case([{"role": "user", "content": "one"}], [one, *rest])),
        ("key order", case([one], [reordered, *rest])),
        ("input key order", case([one], [one, keys, *rest[1:]])),
        ("int vs float", case([one], [one, as_float, *rest[1:]])),
        ("edited old message", case([one], [_turn("user", "ONE"), *rest])),
        ("edited reply", case([one], [one, _turn("assistant", "b"), *rest[1:]])),
        ("dropped turn", case([one], rest)),
        ("inserted turn", case([one], [one, _turn("user", "x"), *rest])),
        ("no new message", case([one], [one, reply])),
        ("system", case([one], [one, *rest], system="other")),
        ("tools", case([one], [one, *rest], tools=[{"name": "write"}])),
        ("thinking", case([one], [one, *rest], thinking={"type": "disabled"})),
        ("tool_choice", case([one], [one, *rest], tool_choice={"type": "any"})),
        ("fallbacks", case([one], [one, *rest], fallbacks=["m2"])),
        ("max_tokens only", case([one], [one, *rest], max_tokens=5)),
    ]


@pytest.mark.parametrize(("name", "case"), _mutations(), ids=[name for name, _ in _mutations()])
def test_the_fingerprint_decides_as_the_old_one(name: str, case: Any) -> None:
    first, reply, second = case
    new, old = _decide(first, reply, second)
    assert new == old
    expected = {"same", "cache mark moved", "cache mark added", "string content"}
    expected |= {"string in first", "key order", "input key order", "max_tokens only"}
    assert (new == "continue") == (name in expected)


def test_betas_and_endpoint_as_the_old_one() -> None:
    first, reply = _full(_turn("user", "one")), [_turn("assistant", "a")]
    second = _full(_turn("user", "one"), _turn("assistant", "a"), _turn("user", "two"))
    assert _decide(first, reply, second, betas=(["b"], ["b", "c"])) == ("create", "create")
    assert _decide(first, reply, second, betas=(["b", "c"], ["c", "b"])) == ("create", "create")
    other = make_model(API, "http://127.0.0.1:10", compat={"supportsMessageThreads": True})
    assert _decide(first, reply, second, models=(THREADED, other)) == ("create", "create")
    assert _decide(first, reply, second) == ("continue", "continue")


def _random_turn(rng: random.Random) -> dict[str, Any]:
    role = rng.choice(["user", "assistant"])
    if rng.random() < 0.2:
        return {"role": role, "content": rng.choice(["x", "y", ""])}
    blocks: list[Any] = []
    for _ in range(rng.randint(1, 3)):
        block: dict[str, Any] = {"type": "text", "text": rng.choice(["x", "y", "z\u00e9"])}
        if rng.random() < 0.3:
            block["cache_control"] = {"type": "ephemeral"}
        if rng.random() < 0.2:
            block = {
                "type": "tool_use",
                "id": "c",
                "name": "n",
                "input": {"v": rng.choice([1, 1.0, "1"])},
            }
        blocks.append(block)
    return {"role": role, "content": blocks}


def _mutate(rng: random.Random, turns: list[Any]) -> list[Any]:
    out = copy.deepcopy(turns)
    kind = rng.randrange(6)
    index = rng.randrange(len(out))
    if kind == 0:  # an edit (may be an equal turn)
        out[index] = _random_turn(rng)
    elif kind == 1 and isinstance(out[index]["content"], list):  # the cache mark moves
        for block in out[index]["content"]:
            if "cache_control" in block:
                del block["cache_control"]
            else:
                block["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    elif kind == 2:  # string content as blocks, or back
        content = out[index]["content"]
        if isinstance(content, str):
            out[index]["content"] = [{"type": "text", "text": content}]
        elif len(content) == 1 and content[0].get("type") == "text":
            out[index]["content"] = content[0]["text"]
    elif kind == 3:
        del out[index]
    elif kind == 4:
        out.insert(index, _random_turn(rng))
    return out  # kind 5: unchanged


def test_random_mutations_decide_as_the_old_fingerprint() -> None:
    rng = random.Random(38)
    kinds: set[str] = set()
    for _ in range(600):
        history = [_random_turn(rng) for _ in range(rng.randint(1, 6))]
        reply = [_random_turn(rng) for _ in range(rng.randint(0, 2))]
        prefix = _mutate(rng, [*history, *reply]) if rng.random() < 0.7 else [*history, *reply]
        second = _full(*prefix, *[_random_turn(rng) for _ in range(rng.randint(0, 2))])
        new, old = _decide(_full(*history), reply, second)
        assert new == old
        kinds.add(new)
    assert kinds == {"create", "continue"}


# -- the requests of whole sessions against the typed whole-transcript build ------------------


def _reply(index: int, *, calls: int) -> AssistantMessage:
    blocks: list[Any] = [TextContent(text=f"answer {index}")]
    if index % 4 == 1:
        blocks.insert(0, ThinkingContent(thinking=f"hmm {index}", thinking_signature=f"sig{index}"))
    names = ["read", "bash", "my_lookup"]
    blocks += [
        ToolCall(id=f"call {index}.{n}", name=names[(index + n) % 3], arguments={"i": index})
        for n in range(calls)
    ]
    message = assistant(*blocks, api=API, stop_reason="toolUse" if calls else "stop")
    rid = None if index % 9 == 4 else f"msg_{index}"
    return attrs.evolve(message, response_id=rid)


def _session(oauth: bool, threaded: bool, turns: int) -> tuple[int, dict[str, int]]:
    """Every request of a made session, new build against the old; the kinds counted."""
    model = THREADED
    settings = ProviderSettings()
    threads, old = ThreadStates(), OldThreads()
    transcript: list[LlmMessage] = []
    system = "sys"
    kinds = {"create": 0, "continue": 0, "plain": 0}
    for index in range(turns):
        if index % 3 == 2:
            transcript.append(UserMessage(content=f"plain {index}", timestamp=index))
        else:
            transcript.append(user_message(f"ask {index}", timestamp=index))
        if index % 13 == 7:  # an edited old message: a new transcript, a new thread
            transcript = [user_message("edited", timestamp=0), *transcript[1:]]
        if index % 17 == 11:
            system = f"sys {index}"
        options = StreamOptions(session_id="s1" if threaded else None)
        context = LlmContext(
            system_prompt=system, messages=tuple(transcript), tools=(*TOOLS, OWN_TOOL)
        )
        request = build_request(
            model,
            context,
            options,
            api_key=OAUTH if oauth else "k",
            headers={},
            settings=settings,
            threads=threads,
        )
        assert isinstance(request, AnthropicRequest)
        identity = {"type": "text", "text": CLAUDE_CODE_IDENTITY, "cache_control": EPHEMERAL}
        system_first = [identity] if oauth else []
        full = _old_full(model, context, options, settings, oauth, system_first)
        betas = [b for b in request.headers.get("anthropic-beta", "").split(",") if b]
        if request.thread is None:
            assert not threaded
            expected = full
            kinds["plain"] += 1
        else:
            expected = old.plan(model, full, betas)
            kinds[request.thread.kind] += 1
        assert body_bytes(request.body) == orjson.dumps(expected), index
        reply = _reply(index, calls=index % 3)
        if request.thread is not None:
            turns_sent = reply_turns(model, reply, oauth=oauth)
            record_reply(threads, model, request.thread, turns_sent, reply.response_id, None)
            if reply.response_id is not None:
                old.record(model, full, betas, turns_sent, reply.response_id)
        transcript.append(reply)
        for call in reply.tool_calls[: 1 if index % 5 == 3 else None]:  # some left owed
            transcript.append(tool_result(call.id, f"out {index}", name=call.name))
    return turns, kinds


@pytest.mark.parametrize("oauth", [False, True])
def test_threaded_session_requests_are_the_old_bytes(oauth: bool) -> None:
    _, kinds = _session(oauth, threaded=True, turns=60)
    assert kinds["continue"] > 30 and kinds["create"] > 5


def test_oauth_session_outside_a_thread_is_the_old_bytes() -> None:
    _, kinds = _session(True, threaded=False, turns=40)
    assert kinds["plain"] == 40


@pytest.mark.parametrize("cache", [None, {"type": "ephemeral", "ttl": "1h"}])
def test_plain_turns_and_their_chain(cache: dict[str, Any] | None) -> None:
    transcript: list[LlmMessage] = []
    builder = PlainTurns(THREADED)
    for index in range(12):
        for message in [user_message(f"u{index}", timestamp=1), _reply(index, calls=index % 3)]:
            transcript.append(message)
            builder.feed(message)
            turns, chain_at = builder.request_turns(cache)
            context = LlmContext(system_prompt="", messages=tuple(transcript))
            assert turns == build_messages(THREADED, context, cache)
            for count in (len(turns), *range(len(turns) + 1)):  # asked out of order too
                assert chain_at(count) == chain_of(turns[:count])


def test_a_turn_costs_its_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    links, conversions = [0], [0]
    link, blocks = anthropic_threads.chain_link, anthropic_turns._assistant_blocks

    def counted_link(previous: bytes, turn: Any) -> bytes:
        links[0] += 1
        return link(previous, turn)

    def counted_blocks(*args: Any) -> Any:
        conversions[0] += 1
        return blocks(*args)

    monkeypatch.setattr(anthropic_threads, "chain_link", counted_link)
    monkeypatch.setattr(anthropic_plain, "chain_link", counted_link)
    monkeypatch.setattr(anthropic_turns, "_assistant_blocks", counted_blocks)
    threads = ThreadStates()
    transcript: list[LlmMessage] = []
    built: list[int] = []  # links made building the request
    per_turn: list[tuple[int, int]] = []  # links and conversions, request and record
    for index in range(300):
        transcript.append(user_message(f"ask {index}", timestamp=index))
        links[0] = conversions[0] = 0
        context = LlmContext(system_prompt="s", messages=tuple(transcript), tools=TOOLS)
        options = StreamOptions(session_id="s1")
        request = build_request(
            THREADED,
            context,
            options,
            api_key=OAUTH,
            headers={},
            settings=ProviderSettings(),
            threads=threads,
        )
        assert isinstance(request, AnthropicRequest) and request.thread is not None
        built.append(links[0])
        reply = assistant(TextContent(text=f"a{index}"), api=API)
        reply = attrs.evolve(reply, response_id=f"m{index}")
        record_reply(
            threads,
            THREADED,
            request.thread,
            reply_turns(THREADED, reply, oauth=True),
            f"m{index}",
            None,
        )
        transcript.append(reply)
        per_turn.append((links[0], conversions[0]))
        assert request.thread.kind == ("create" if index in (0, 151) else "continue")
        if index == 150:  # an edited message: a new builder, a new thread, linked at its record
            transcript[0] = user_message("edited", timestamp=0)
    # A new thread's request goes out before its turns are linked (its record links them),
    # unless a mark asks for the comparison (after the edit: the new builder's turns, once);
    # a continued one converts and links a few turns, at any length.
    assert built[0] == 0 and per_turn[0][0] == 2 and built[151] > 300
    assert max(links for links, _ in per_turn[1:151] + per_turn[152:]) <= 4
    assert max(conversions for _, conversions in per_turn[1:151] + per_turn[152:]) <= 2


def test_joined_list_reads_as_the_list_it_stands_for() -> None:
    shared = [{"a": index} for index in range(5)]
    tail = [{"t": 0}, {"t": 1}]
    joined = JoinedList(shared, 3, tail)
    shared.append({"a": 99})  # the shared list grows later: the view does not
    expected = [*shared[:3], *tail]
    assert joined == expected and list(joined) == expected and len(joined) == 5
    for index in range(-5, 5):
        assert joined[index] == expected[index]
    with pytest.raises(IndexError):
        joined[5]
    for start in range(-6, 7):
        for stop in (*range(-6, 7), None):
            assert joined[start:stop] == expected[start:stop]
    assert joined[::2] == expected[::2]
    assert encode_json_pieces({"m": joined}) == orjson.dumps({"m": expected})
    lone = JoinedList(["\ud800"], 1, [])
    assert encode_json_pieces([lone]) == b'[["\\ud800"]]'


def test_a_held_plan_keeps_its_request_while_the_session_grows() -> None:
    threads = ThreadStates()
    transcript: list[LlmMessage] = []
    held: list[tuple[Any, bytes]] = []
    for index in range(20):
        transcript.append(user_message(f"ask {index}", timestamp=index))
        context = LlmContext(system_prompt="s", messages=tuple(transcript), tools=TOOLS)
        request = build_request(
            THREADED,
            context,
            StreamOptions(session_id="s1"),
            api_key="k",
            headers={},
            settings=ProviderSettings(),
            threads=threads,
        )
        assert isinstance(request, AnthropicRequest) and request.thread is not None
        held.append((request.thread, body_bytes(encode_json_pieces(request.thread.full))))
        reply = attrs.evolve(_reply(index, calls=1), response_id=f"m{index}")
        record_reply(
            threads,
            THREADED,
            request.thread,
            reply_turns(THREADED, reply, oauth=False),
            f"m{index}",
            None,
        )
        transcript += [reply, tool_result(reply.tool_calls[0].id, "out")]
    for plan, sent in held:  # a fallback resends the whole request as it was
        assert body_bytes(encode_json_pieces(plan.full)) == sent


def test_the_default_chain_reader_answers_in_any_order() -> None:
    turns = [_turn("user", str(index)) for index in range(6)]
    at = anthropic_threads._chain_reader(turns)
    for count in (3, 5, 1, 5, 0, 6, 2):
        assert at(count) == chain_of(turns[:count])
