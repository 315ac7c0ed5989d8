"""Property tests of the one codec: every wire type of pitrio.messages round-trips.

Strategies are built from the attrs fields of each class (their resolved type hints), so a
new class or field is covered without touching this file. The JSON-shape rules of the codec
(camelCase keys in field order with the tag first, optional fields omitted, required nullable
fields written as null, whole floats written as integers, ``extra`` kept) are checked on the
generated values and on hand-written examples.
"""

from __future__ import annotations

import collections.abc
import inspect
import re
import types
import typing
from functools import cache
from typing import Any, Literal, get_args, get_origin

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitrio.errors import DecodeError
from pitrio.messages import agent, codec, content, entries, events, model, stream
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    BashExecutionMessage,
    Cost,
    CustomMessage,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.codec import decode, encode, from_json, to_json
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.entries import (
    CompactionEntry,
    CompactionResult,
    ContentReplacement,
    ContextEditEntry,
    FileLine,
    LabelEntry,
    MessageEntry,
    SessionHeader,
)
from pitrio.messages.events import AgentSessionEvent, AgentStart, CompactionEnd, ToolExecutionEnd
from pitrio.messages.model import LlmContext, Model, ModelCost, ToolSpec
from pitrio.messages.stream import AssistantMessageEvent, PartialUpdate, TextDelta
from tests.actors.providers.support import assistant

WIRE_MODULES = (content, agent, model, stream, events, entries)


def _wire_classes() -> list[type]:
    found: list[type] = []
    for module in WIRE_MODULES:
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if attrs.has(obj) and obj.__module__ == module.__name__:
                attrs.resolve_types(obj)
                if obj is not UnknownMessage:  # a wrapper of any JSON object: tested below
                    found.append(obj)
    return found


WIRE_CLASSES = _wire_classes()
IDS = [cls.__name__ for cls in WIRE_CLASSES]

# The unions a decoder reads a value as in practice: a class must also round-trip through them.
UNIONS: tuple[Any, ...] = (AgentMessage, FileLine, AgentSessionEvent, AssistantMessageEvent)


def _unions_of(cls: type) -> list[Any]:
    return [union for union in UNIONS if cls in get_args(union)]


def _is_extra(field: attrs.Attribute[Any]) -> bool:
    return field.name == "extra"


def _is_tag(field: attrs.Attribute[Any]) -> bool:
    return not field.init


def _camel(name: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


# --- strategies ----------------------------------------------------------------------------

SMALL_TEXT = st.text(max_size=6)
JS_INTS = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
JSON_BLOB: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | JS_INTS | FINITE | SMALL_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SMALL_TEXT, inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value (lists, not tuples: that is what decoding an ``Any`` field gives back)."""


@cache
def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy for values of the (resolved) type ``tp`` as the wire classes use it."""
    origin = get_origin(tp)
    if tp is Any:
        return JSON_BLOB
    if tp is type(None):
        return st.none()
    if tp is str:
        return SMALL_TEXT
    if tp is bool:
        return st.booleans()
    if tp is int:
        return JS_INTS
    if tp is float:
        return FINITE | JS_INTS  # ints too: the float fields' defaults are ``0``
    if origin is Literal:
        return st.sampled_from(get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy_for(member) for member in get_args(tp)])
    if origin is tuple:
        elem, ellipsis = get_args(tp)
        assert ellipsis is Ellipsis, tp
        return st.lists(strategy_for(elem), max_size=2).map(tuple)
    if origin is collections.abc.Sequence:  # an immutable sequence: decoded as a tuple
        (elem,) = get_args(tp)
        return st.lists(strategy_for(elem), max_size=2).map(tuple)
    if origin is dict:
        key, value = get_args(tp)
        assert key is str, tp
        return st.dictionaries(SMALL_TEXT, strategy_for(value), max_size=2)
    if tp is UnknownMessage:
        return st.dictionaries(SMALL_TEXT, JSON_BLOB, max_size=3).map(
            lambda data: UnknownMessage(data={"role": "futureRole", **data, "timestamp": 1})
        )
    if attrs.has(tp):
        return builds(tp)
    raise AssertionError(f"no strategy for {tp!r}")


def builds(cls: type) -> st.SearchStrategy[Any]:
    """Instances of a wire class with every field generated from its type (no ``extra``)."""
    fields = {
        field.name: strategy_for(field.type)
        for field in attrs.fields(cls)
        if not _is_tag(field) and not _is_extra(field)
    }
    return st.builds(cls, **fields)


FAST = settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])


# --- coverage of the class list ------------------------------------------------------------


def test_every_wire_type_is_generated() -> None:
    expected = {
        TextContent, ThinkingContent, ImageContent, ToolCall,
        UserMessage, AssistantMessage, ToolResultMessage, BashExecutionMessage, CustomMessage,
        agent.BranchSummaryMessage, agent.CompactionSummaryMessage, agent.Diagnostic,
        Usage, Cost, AgentToolResult,
        Model, ModelCost, ToolSpec, LlmContext,
        SessionHeader, MessageEntry, CompactionEntry, ContextEditEntry, ContentReplacement,
        LabelEntry, CompactionResult, entries.UsageEntry, agent.NestedToolCalls,
        agent.NestedToolCallRecord, AgentStart, CompactionEnd, ToolExecutionEnd, TextDelta,
    }  # fmt: skip
    assert expected <= set(WIRE_CLASSES)
    for union in (*UNIONS, PartialUpdate, entries.SessionEntry, events.AgentEvent):
        assert set(get_args(union)) - {UnknownMessage} <= set(WIRE_CLASSES)
    # at least the 10 agent events + 13 session events, 12 stream events, header + 10 entry
    # types and 7 message roles (more may come; the subset check above covers them)
    assert len(get_args(AgentSessionEvent)) >= 23
    assert len(get_args(AssistantMessageEvent)) >= 12
    assert len(get_args(FileLine)) >= 11
    assert len(get_args(AgentMessage)) >= 7


# --- the JSON shape ------------------------------------------------------------------------


def _expected_keys(value: Any) -> list[str]:
    keys = []
    for field in attrs.fields(type(value)):
        if _is_extra(field):
            continue
        optional = field.default is None
        if getattr(value, field.name) is None and optional:
            continue
        keys.append(_camel(field.name))
    return keys


def check_shape(value: Any, plain: dict[str, Any]) -> None:
    """camelCase keys in field order, the tag first; optional None omitted, required None null."""
    assert list(plain) == _expected_keys(value)
    assert all("_" not in key for key in plain)
    tag_fields = [f for f in attrs.fields(type(value)) if _is_tag(f)]
    if tag_fields:
        (tag_field,) = tag_fields
        assert next(iter(plain)) == tag_field.name
        assert plain[tag_field.name] == tag_field.default
    for field in attrs.fields(type(value)):
        if _is_extra(field) or getattr(value, field.name) is not None:
            continue
        if field.default is None:
            assert _camel(field.name) not in plain
        else:
            assert plain[_camel(field.name)] is None


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", WIRE_CLASSES, ids=IDS)
def test_round_trip(cls: type) -> None:
    unions = _unions_of(cls)

    @FAST
    @given(builds(cls))
    def check(value: Any) -> None:
        plain = to_json(value)
        check_shape(value, plain)
        assert from_json(plain, cls) == value
        data = encode(value)
        assert decode(data, cls) == value
        assert orjson.loads(data) == plain
        for union in unions:
            # A subclass sharing its base's tag (EntryRecorded) decodes as the base: the JSON
            # is the same, and so are the bytes the base writes.
            base = next((b for b in cls.__mro__[1:] if b in get_args(union)), None)
            expected = cls if base is None else base
            got = from_json(plain, union)
            assert type(got) is expected and to_json(got) == plain
            assert type(decode(data, union)) is expected
            if base is None:
                assert got == value
        # encoding is stable: a decoded value writes the same bytes again
        assert encode(decode(data, cls)) == data

    check()


def test_root_entry_parent_is_written_as_null_and_optional_fields_are_omitted() -> None:
    # the spec's example line, byte for byte
    line = (
        b'{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2024-12-03T14:00:01.000Z",'
        b'"message":{"role":"user","content":"Hello","timestamp":1733234401000}}'
    )
    entry = decode(line, FileLine)
    assert isinstance(entry, MessageEntry)
    assert entry.parent_id is None
    assert encode(entry) == line
    label = LabelEntry(id="0a1b2c3d", parent_id="a1b2c3d4", timestamp="t", target_id="a1b2c3d4")
    assert encode(label) == (
        b'{"type":"label","id":"0a1b2c3d","parentId":"a1b2c3d4","timestamp":"t",'
        b'"targetId":"a1b2c3d4"}'
    )
    edit = ContextEditEntry(id="e", parent_id=None, timestamp="t", target_id="x", replacement=None)
    assert encode(edit) == (
        b'{"type":"context_edit","id":"e","parentId":null,"timestamp":"t","targetId":"x",'
        b'"replacement":null}'
    )


def test_whole_floats_are_written_as_integers() -> None:
    usage = Usage(input=10, output=2, total_tokens=12, cost=Cost(input=0.0, output=3.0, total=0.5))
    assert encode(usage) == (
        b'{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,'
        b'"cost":{"input":0,"output":3,"cacheRead":0,"cacheWrite":0,"total":0.5}}'
    )
    assert encode(ModelCost(input=1.0, output=15.0, cache_read=0.3, cache_write=3.75)) == (
        b'{"input":1,"output":15,"cacheRead":0.3,"cacheWrite":3.75}'
    )
    # and read back as floats that compare equal
    cost = decode(b'{"input":0,"output":3,"cacheRead":0,"cacheWrite":0,"total":0.5}', Cost)
    assert cost == Cost(input=0.0, output=3.0, total=0.5)
    assert isinstance(cost.input, float)


@FAST
@given(st.builds(Cost, input=FINITE, output=FINITE, cache_read=FINITE, cache_write=FINITE))
def test_float_fields_never_write_a_whole_number_with_a_fraction(cost: Cost) -> None:
    text = encode(cost).decode()
    for value, written in zip(
        (cost.input, cost.output, cost.cache_read, cost.cache_write),
        re.findall(r":([^,}]+)", text),
        strict=False,
    ):
        if value.is_integer() and abs(value) < 2**53:
            assert written == str(int(value))


# --- unknown keys --------------------------------------------------------------------------

EXTRA_CLASSES = [cls for cls in WIRE_CLASSES if any(_is_extra(f) for f in attrs.fields(cls))]
STRICT_CLASSES = [cls for cls in WIRE_CLASSES if cls not in EXTRA_CLASSES]


def test_every_class_keeps_extras() -> None:
    # DESIGN.md §4: unknown fields are preserved, never refused. Under 0.73.1 only session
    # lines and messages kept them; pi 1.6.0 added fields to usage, costs, content blocks and
    # events alike (``usage.reasoning``, ``cost.totalFromProvider``, ``toolCall.namespace``),
    # so every class keeps what a newer pi writes.
    assert STRICT_CLASSES == []
    assert {TextContent, Usage, Cost, AgentStart, ToolCall, Model} <= set(EXTRA_CLASSES)


@pytest.mark.parametrize("cls", EXTRA_CLASSES, ids=[c.__name__ for c in EXTRA_CLASSES])
def test_unknown_keys_land_in_extra_and_are_written_back(cls: type) -> None:
    @FAST
    @given(
        builds(cls),
        st.dictionaries(st.sampled_from(["zNew", "futureField", "x_y"]), JSON_BLOB, min_size=1),
    )
    def check(value: Any, unknown: dict[str, Any]) -> None:
        plain = {**to_json(value), **unknown}
        decoded: Any = from_json(plain, cls)
        assert decoded == value
        assert decoded.extra == unknown
        assert to_json(decoded) == plain
        assert list(to_json(decoded)) == list(plain)  # unknown keys written after known ones
        assert orjson.loads(encode(decoded)) == plain

    check()


def test_extra_is_kept_inside_nested_messages() -> None:
    line = {
        "type": "message", "id": "a", "parentId": None, "timestamp": "t", "futureEntryKey": 1,
        "message": {"role": "user", "content": "hi", "timestamp": 5, "futureMsgKey": [1, 2]},
    }  # fmt: skip
    entry = from_json(line, FileLine)
    assert isinstance(entry, MessageEntry)
    assert entry.extra == {"futureEntryKey": 1}
    assert entry.message.extra == {"futureMsgKey": [1, 2]}  # type: ignore[union-attr]
    assert to_json(entry) == line


def test_unknown_keys_deep_in_a_message_are_kept_in_place() -> None:
    # a newer pi's fields inside usage, cost and a content block: kept, written back where
    # they were (the key order of the object read), nothing refused
    usage = to_json(Usage())
    usage["cost"] = {**usage["cost"], "surpriseKey": 0}
    usage = {"input": 0, "surprise": [1], **{k: v for k, v in usage.items() if k != "input"}}
    message = to_json(
        AssistantMessage(
            content=(TextContent(text="hi"),),
            api="a",
            provider="p",
            model="m",
            usage=Usage(),
            stop_reason="stop",
            timestamp=1,
        )
    )
    message["usage"] = usage
    message["content"] = [{"type": "text", "futureKey": True, "text": "hi"}]
    decoded = from_json(message, AgentMessage)
    assert isinstance(decoded, AssistantMessage)
    assert decoded.usage.extra == {"surprise": [1]}
    assert decoded.usage.cost.extra == {"surpriseKey": 0}
    assert orjson.dumps(to_json(decoded)) == orjson.dumps(message)


def test_unknown_roles_are_kept_as_they_were() -> None:
    line = {
        "type": "message", "id": "a", "parentId": None, "timestamp": "t",
        "message": {"kind": 1, "role": "futureRole", "timestamp": 5, "x": {"y": [1]}},
    }  # fmt: skip
    entry = from_json(line, FileLine)
    assert isinstance(entry, MessageEntry)
    assert isinstance(entry.message, UnknownMessage)
    assert entry.message.role == "futureRole" and entry.message.timestamp == 5
    assert orjson.dumps(to_json(entry)) == orjson.dumps(line)
    assert decode(encode(entry), FileLine) == entry
    # known roles still go to their classes, and a role must be a string
    assert isinstance(from_json({"role": "user", "content": "x", "timestamp": 1}, AgentMessage),
                      UserMessage)  # fmt: skip
    for bad in ({"content": "x"}, {"role": 5}):
        with pytest.raises(DecodeError, match="role"):
            from_json(bad, AgentMessage)


def test_extra_does_not_take_part_in_equality_but_survives_a_round_trip() -> None:
    plain = {"role": "user", "content": "x", "timestamp": 1, "k": True}
    message = from_json(plain, UserMessage)
    assert message == UserMessage(content="x", timestamp=1)
    assert from_json(to_json(message), UserMessage).extra == {"k": True}


# --- tags and unions -----------------------------------------------------------------------


TAGGED_CLASSES = [cls for cls in WIRE_CLASSES if any(_is_tag(f) for f in attrs.fields(cls))]


@pytest.mark.parametrize("cls", TAGGED_CLASSES, ids=[c.__name__ for c in TAGGED_CLASSES])
def test_a_wrong_or_missing_tag_is_rejected(cls: type) -> None:
    @settings(max_examples=3)
    @given(builds(cls))
    def check(value: Any) -> None:
        (tag_field,) = [f for f in attrs.fields(cls) if _is_tag(f)]
        plain = to_json(value)
        with pytest.raises(DecodeError, match="not-a-tag"):
            from_json({**plain, tag_field.name: "not-a-tag"}, cls)
        del plain[tag_field.name]
        with pytest.raises(DecodeError, match=cls.__name__):
            from_json(plain, cls)

    check()


def test_user_content_string_or_blocks() -> None:
    as_text = from_json({"role": "user", "content": "hi", "timestamp": 1}, UserMessage)
    assert as_text.content == "hi"
    blocks = {
        "role": "user",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "QQ==", "mimeType": "image/png"},
        ],
        "timestamp": 1,
    }
    as_blocks = from_json(blocks, UserMessage)
    assert as_blocks.content == (
        TextContent(text="a"),
        ImageContent(data="QQ==", mime_type="image/png"),
    )
    assert to_json(as_blocks) == blocks


def test_sequences_decode_as_tuples_and_encode_as_arrays() -> None:
    result = AgentToolResult(content=(TextContent(text="x"),), details={"n": [1, 2]})
    plain = to_json(result)
    assert plain == {"content": [{"type": "text", "text": "x"}], "details": {"n": [1, 2]}}
    decoded = from_json(plain, AgentToolResult)
    assert isinstance(decoded.content, tuple)
    assert from_json(
        [to_json(UserMessage(content="a", timestamp=1))], tuple[AgentMessage, ...]
    ) == (UserMessage(content="a", timestamp=1),)


def test_optional_literal_fields_decode() -> None:
    event = {
        "type": "summarization_retry_attempt_start",
        "source": "compaction",
        "reason": "overflow",
    }
    decoded = from_json(event, AgentSessionEvent)
    assert isinstance(decoded, events.SummarizationRetryAttemptStart)
    assert decoded.reason == "overflow"
    assert to_json(decoded) == event
    assert from_json({"reasoning": "high"}, model.StreamOptions).reasoning == "high"


def _answer(text: str) -> AssistantMessage:
    return assistant(TextContent(text=text))


def test_encode_reusing_writes_what_encode_writes_and_reuses_only_inside() -> None:
    answer = _answer("hello")
    end = events.MessageEnd(message=answer)
    turn = events.TurnEnd(message=answer, tool_results=())
    assert codec.encode_reusing(end) == encode(end)
    assert codec.encode_reusing(turn) == encode(turn)
    assert codec._reused[id(answer)][0] is answer  # met once, kept for the next line
    # Outside encode_reusing a caller gets a value of its own: changing it changes nothing.
    mine = to_json(answer)
    assert mine is not codec._reused[id(answer)][1]
    mine["content"][0]["text"] = "changed"
    assert codec.encode_reusing(end) == encode(end)
    assert b"changed" not in codec.encode_reusing(turn)


def test_encode_reusing_keeps_a_bounded_number_of_messages() -> None:
    answers = [_answer(f"answer {index}") for index in range(codec._REUSE_LIMIT * 3)]
    for answer in answers:
        line = codec.encode_reusing(events.MessageEnd(message=answer))
        assert line == encode(events.MessageEnd(message=answer))
    assert len(codec._reused) <= codec._REUSE_LIMIT
    assert codec._reused[id(answers[-1])][0] is answers[-1]  # the latest stay
    assert id(answers[0]) not in codec._reused or codec._reused[id(answers[0])][0] is not answers[0]


def test_lone_surrogates_are_encoded_as_javascript_escapes() -> None:
    from pitrio.messages.agent import user_message
    from pitrio.messages.codec import dumps, encode

    assert dumps({"a": "x\ud800y", "b": 1.5}) == b'{"a":"x\\ud800y","b":1.5}'
    assert b'"text":"half \\udc00"' in encode(user_message("half \udc00", timestamp=1))
    assert dumps({"ok": "\u00e9"}) == '{"ok":"\u00e9"}'.encode()
