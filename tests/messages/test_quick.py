"""The quick message decoder against the general one: whatever it accepts decodes to the same
value (type, fields, kept unknown keys, encoding); whatever the general decoder refuses, it
leaves to the general decoder (so the error raised is the general one's)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitrio.errors import DecodeError, SessionFileError
from pitrio.messages.agent import AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.codec import encode, from_json
from pitrio.messages.quick import decode_message
from tests.shared_dir import SHARED

CLASSES = {"user": UserMessage, "assistant": AssistantMessage, "toolResult": ToolResultMessage}


def _extras(value: Any) -> Any:
    """Every object's kept unknown keys and their order, recursively (``eq`` ignores them)."""
    if isinstance(value, tuple):
        return [_extras(item) for item in value]
    fields = getattr(type(value), "__attrs_attrs__", None)
    if fields is None:
        return None
    extra = value.extra
    own = None if extra is None else (dict(extra), getattr(extra, "order", None))
    return [own, *(_extras(getattr(value, f.name)) for f in fields if f.name != "extra")]


def _same(quick: Any, general: Any) -> None:
    assert type(quick) is type(general)
    assert quick == general
    assert repr(quick) == repr(general)  # 0 against 0.0, a tuple against a list
    assert encode(quick) == encode(general)  # key order and unknown keys as written back
    assert _extras(quick) == _extras(general)


def _check(value: Any, cls: Any) -> bool:
    """Compare both decoders on ``value``; whether the quick one decoded it."""
    try:
        general = from_json(value, cls)
    except Exception:
        general = None
    quick = decode_message(value, cls)
    if quick is None:
        return False
    assert general is not None, f"quick decoded what the general decoder refuses: {value!r}"
    _same(quick, general)
    return True


def messages_in(value: Any, found: list[dict[str, Any]]) -> None:
    """Collect into ``found`` every JSON object under ``value`` whose role is one of
    :data:`CLASSES`'s (the shared fixtures' messages, wherever a transcript holds them)."""
    if isinstance(value, dict):
        if value.get("role") in CLASSES:
            found.append(value)
        for item in value.values():
            messages_in(item, found)
    elif isinstance(value, list):
        for item in value:
            messages_in(item, found)


def _fixture_messages() -> list[dict[str, Any]]:
    """Every user, assistant and tool result message found in the shared fixtures (session
    files, RPC transcripts, contexts), good or not."""
    found: list[dict[str, Any]] = []
    for path in sorted((SHARED / "fixtures").rglob("*.json*")):
        data = path.read_bytes()
        for text in [data] if path.suffix == ".json" else data.splitlines():
            try:
                messages_in(orjson.loads(text), found)
            except orjson.JSONDecodeError:
                continue
    return found


def test_fixture_messages_decode_alike() -> None:
    messages = _fixture_messages()
    if not messages:
        pytest.skip("no shared fixtures (PITRIO_SHARED_DIR)")
    handled = sum(_check(message, CLASSES[message["role"]]) for message in messages)
    valid = 0
    for message in messages:
        try:
            from_json(message, CLASSES[message["role"]])
        except DecodeError:
            continue
        valid += 1
    # The shapes pi writes are the quick path's: nearly all valid ones taken by it.
    assert handled >= 0.9 * valid > 0, (handled, valid, len(messages))


USAGE = {
    "input": 1000,
    "output": 50,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 1050,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}
ASSISTANT = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
        {"type": "text", "text": "hello"},
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}},
    ],
    "api": "openai-completions",
    "provider": "mock",
    "model": "m",
    "usage": USAGE,
    "stopReason": "toolUse",
    "timestamp": 1767225600000,
    "responseId": "r1",
    "durationMs": 12,
    "thinkingLevel": "off",
}
USER = {
    "role": "user",
    "content": [
        {"type": "text", "text": "look"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    ],
    "timestamp": 1767225600000,
}
RESULT = {
    "role": "toolResult",
    "toolCallId": "c1",
    "toolName": "bash",
    "content": [{"type": "text", "text": "out"}],
    "details": {"exitCode": 0},
    "isError": False,
    "timestamp": 1767225600000,
}
FULL_ASSISTANT = {
    **ASSISTANT,
    "content": [
        {"type": "thinking", "thinking": "", "thinkingSignature": None, "redacted": True},
        {"type": "text", "text": "a", "textSignature": "s"},
        {"type": "toolCall", "id": "c", "name": "n", "arguments": {}, "thoughtSignature": "t"}
        | {"namespace": "ns"},
    ],
    "usage": {**USAGE, "reasoning": 3, "cacheWrite1h": 0}
    | {"cost": {**USAGE["cost"], "input": 0.5, "totalFromProvider": False}},
    "providerThinkingLevel": "high",
    "responseModel": "m2",
    "rawStopReason": "end_turn",
    "errorMessage": "e",
    "endTurn": True,
}
FULL_RESULT = {**RESULT, "usage": USAGE, "durationMs": 5, "content": USER["content"]}
BASES = [
    (ASSISTANT, AssistantMessage),
    (FULL_ASSISTANT, AssistantMessage),
    (USER, UserMessage),
    (RESULT, ToolResultMessage),
    (FULL_RESULT, ToolResultMessage),
    ({**USER, "content": "plain"}, UserMessage),
]


@pytest.mark.parametrize(("value", "cls"), BASES)
def test_usual_shapes_take_the_quick_path(value: dict[str, Any], cls: Any) -> None:
    assert _check(value, cls)
    assert _check({**value, "futureField": [1, {"x": None}]}, cls)  # unknown keys kept


def test_zero_costs_share_one_object() -> None:
    first = decode_message(ASSISTANT, AssistantMessage)
    second = decode_message(orjson.loads(orjson.dumps(ASSISTANT)), AssistantMessage)
    assert first.usage.cost is second.usage.cost
    assert first.usage.cost == from_json(ASSISTANT, AssistantMessage).usage.cost


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "text", "stop", "toolUse", "off", "high", "image", "toolCall"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = sorted(
    {key for value, _ in BASES for key in value}
    | {"type", "text", "textSignature", "thinking", "redacted", "id", "name", "arguments"}
    | {"thoughtSignature", "namespace", "data", "mimeType", "diagnostics", "nestedCalls"}
    | {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost", "total"}
    | {"reasoning", "cacheWrite1h", "totalFromProvider", "endTurn", "usage", "errorMessage"}
    | {"extra", "unknownKey", "role"}
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*path, index))
    return out


def _container(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[Any, Any]:
    """A usual message with a few changes anywhere: a value replaced (by any JSON, a whole
    float, a bool, null), a key removed, a key added."""
    base, cls = draw(st.sampled_from(BASES))
    value = orjson.loads(orjson.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["replace", "remove", "add", "float", "retype"]))
        paths = _paths(value)
        if action == "add":  # among the objects only, the message itself included
            paths = [path for path in paths if isinstance(_container(value, path), dict)]
        path = draw(st.sampled_from(paths))
        target = _container(value, path)
        if not path:
            if action == "add":
                value[draw(st.sampled_from(KEYS))] = draw(JSON | st.booleans())
            continue
        parent = _container(value, path[:-1])
        last = path[-1]
        if action == "replace":
            parent[last] = draw(JSON)
        elif action == "remove":
            del parent[last]
        elif action == "float" and isinstance(target, int) and not isinstance(target, bool):
            parent[last] = float(target)
        elif action == "retype" and isinstance(target, dict) and "type" in target:
            target["type"] = draw(st.sampled_from(["text", "thinking", "toolCall", "image", "x"]))
        elif action == "add" and isinstance(target, dict):
            target[draw(st.sampled_from(KEYS))] = draw(JSON | st.booleans())
    return value, cls


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_messages_decode_alike_or_fall_back(case: tuple[Any, Any]) -> None:
    value, cls = case
    _check(value, cls)


@settings(max_examples=300, deadline=None)
@given(JSON, st.sampled_from(list(CLASSES.values())))
def test_any_json_decodes_alike_or_falls_back(value: Any, cls: Any) -> None:
    _check(value, cls)


def test_invalid_message_in_a_session_raises_the_general_error() -> None:
    # Through the store's hot path: the same SessionFileError text as the general decoder's.
    from pitrio.actors.session_store.stored import StoredEntry

    bad = {**ASSISTANT, "timestamp": "soon"}
    line = orjson.dumps(
        {"type": "message", "id": "a1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z"}
        | {"message": bad}
    )
    entry = StoredEntry(
        type="message",
        id="a1",
        parent_id=None,
        timestamp="2026-01-01T00:00:00.000Z",
        raw=line,
        role="assistant",
        line=2,
        origin="s.jsonl",
    )
    with pytest.raises(SessionFileError) as raised:
        entry.message()
    with pytest.raises(DecodeError) as general:
        from_json(bad, AssistantMessage)
    assert str(general.value) in str(raised.value)
    assert "$.timestamp" in str(raised.value)


ODD_VALUES = [None, True, False, 0, 1, 2.0, 1.5, "", "x", "text", [], {}, [{"type": "text"}]]


@pytest.mark.parametrize(("base", "cls"), BASES)
def test_every_field_replaced_or_removed_decodes_alike_or_falls_back(
    base: dict[str, Any], cls: Any
) -> None:
    # Exhaustive where the random test samples: each value of a usual message in turn
    # replaced by each odd value, or removed, or given an unknown sibling key.
    for path in _paths(base):
        if not path:
            continue
        for change in [*ODD_VALUES, "remove", "sibling"]:
            value = orjson.loads(orjson.dumps(base))
            parent = _container(value, path[:-1])
            if change == "remove":
                del parent[path[-1]]
            elif change == "sibling":
                if not isinstance(parent, dict):
                    continue
                parent["zz"] = 1
            else:
                parent[path[-1]] = change
            _check(value, cls)


def test_assistant_names_are_shared_strings() -> None:
    # A long context holds one string of each api, provider and model (as share_names does
    # for the general decoder), not one per message.
    text = orjson.dumps({**ASSISTANT, "api": "an-api-" + "x" * 40})
    first = decode_message(orjson.loads(text), AssistantMessage)
    second = decode_message(orjson.loads(text), AssistantMessage)
    for name in ("api", "provider", "model"):
        assert getattr(first, name) is getattr(second, name)
