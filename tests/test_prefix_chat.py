"""The JSON-level Chat Completions prefix against the typed path: whatever prefix of a stored
transcript it converts, a builder restored from it (``ChatMessages.from_prefix``) is in the
state of a typed builder fed those messages, decoded by the general decoder: the same encoded
segments, pending calls and images, the same ``finish()`` bytes, and the same bytes again after
both are fed the rest of the transcript."""

from __future__ import annotations

import copy
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitrio import _prefix_chat
from pitrio._prefix_chat import prepare_chat_prefix
from pitrio.actors.model_router.providers import convert, openai_completions_request
from pitrio.actors.model_router.providers.convert import (
    FrozenSegment,
    body_bytes,
    encode_json_pieces,
)
from pitrio.actors.model_router.providers.openai_compat import OpenAICompat, normalize_tool_id
from pitrio.actors.model_router.providers.openai_completions_request import (
    ChatMessages,
    facts_of,
)
from pitrio.messages.agent import (
    AssistantMessage,
    StopReason,
    ThinkingLevel,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import from_json
from pitrio.messages.convert import without_images
from pitrio.messages.model import Model, ModelCost
from pitrio.messages.wire import loads
from tests.shared_dir import SHARED

CLASSES = {"user": UserMessage, "assistant": AssistantMessage, "toolResult": ToolResultMessage}
FLAGS = (
    "requires_thinking_as_text",
    "requires_tool_result_name",
    "requires_assistant_after_tool_result",
    "requires_mistral_tool_ids",
)


def make_model(provider: str = "mock", api: str = "openai-completions", id: str = "m", *,
               image: bool = True) -> Model:  # fmt: skip
    """A target model (only its identity and input kinds matter to the conversion)."""
    return Model(
        id=id,
        name=id,
        api=api,
        provider=provider,
        base_url="http://127.0.0.1:9",
        reasoning=False,
        input=("text", "image") if image else ("text",),
        cost=ModelCost(input=0, output=0, cache_read=0, cache_write=0),
        context_window=200000,
        max_tokens=16384,
    )


def targets(provider: str, api: str, id: str) -> list[tuple[Model, OpenAICompat, bool]]:
    """The model of ``provider/api/id`` with and without images, under every combination of
    the compat flags the conversion reads, images blocked by the session or not."""
    out = []
    for image, block, *flags in itertools.product((True, False), repeat=2 + len(FLAGS)):
        compat = OpenAICompat(**dict(zip(FLAGS, flags, strict=True)))
        out.append((make_model(provider, api, id, image=image), compat, block))
    return out


def _pieces(items: list[Any]) -> list[tuple[str, bytes]]:
    """``finish()``'s items as their kinds and bytes (a segment, a fragment or a plain value)."""
    out = []
    for item in items:
        if isinstance(item, FrozenSegment):
            out.append(("segment", item.data))
        elif isinstance(item, orjson.Fragment):
            out.append(("fragment", orjson.dumps(item)))
        else:
            out.append(("plain", orjson.dumps(item)))
    return out


def _state(builder: ChatMessages) -> Any:
    finished = builder.finish()
    return (
        _pieces(builder.entries.items()),
        len(builder.entries),
        builder.last_role,
        [(call.id, call.name) for call in builder.preparer.pending],
        [(image.mime_type, image.data) for image in builder.images],
        _pieces(finished),
        body_bytes(encode_json_pieces({"messages": finished})),
    )


def _decoded(value: Any, block_images: bool) -> Any:
    """The typed path's message: the general decoder's (``None`` where it refuses), images
    blocked as the session's converter blocks them."""
    try:
        if value.__class__ is not dict or value.get("role") not in CLASSES:
            return None
        message = from_json(value, CLASSES[value["role"]])
    except Exception:
        return None
    return without_images(message) if block_images else message


def check(datas: list[bytes], model: Model, compat: OpenAICompat, block: bool = False) -> int:
    """Compare the prefix with the typed path on ``datas``; how many messages it converted."""
    prefix = prepare_chat_prefix(datas, facts_of(model, compat, block_images=block))
    if prefix is None:
        return 0
    assert 0 < prefix.consumed <= len(datas)
    typed = ChatMessages(model, compat, encoded=True)
    values = [loads(data) for data in datas]  # the store's parse
    for value in values[: prefix.consumed]:
        message = _decoded(value, block)
        assert message is not None, f"converted what the typed path refuses: {value!r}"
        typed.feed(message)
    resumed = ChatMessages.from_prefix(model, compat, prefix)
    assert resumed is not None
    assert _state(resumed) == _state(typed)
    rest = [m for m in (_decoded(v, block) for v in values[prefix.consumed :]) if m is not None]
    for message in rest:
        typed.feed(message)
        resumed.feed(message)
        if len(rest) < 40:  # each step of a short rest (a long one: at its end)
            assert _state(resumed) == _state(typed)
    assert _state(resumed) == _state(typed)
    return prefix.consumed


def check_all(datas: list[bytes], provider: str = "mock", api: str = "a", id: str = "m") -> int:
    """:func:`check` for every target of ``provider/api/id``; the most messages converted."""
    return max(check(datas, *target) for target in targets(provider, api, id))


# --- the copies of the typed path's facts ----------------------------------------------------


def test_constants_are_the_typed_paths() -> None:
    assert _prefix_chat.SEGMENT_BYTES == convert.SEGMENT_BYTES
    assert _prefix_chat.NO_RESULT_TEXT == convert.NO_RESULT_TEXT
    assert _prefix_chat.IMAGE_OMITTED_TEXT == convert.IMAGE_OMITTED_TEXT
    assert _prefix_chat.TOOL_IMAGE_OMITTED_TEXT == convert.TOOL_IMAGE_OMITTED_TEXT
    assert set(get_args(StopReason)) == _prefix_chat.STOP_REASONS
    assert set(get_args(ThinkingLevel)) == _prefix_chat.THINKING_LEVELS
    # The request module's literal texts, found in its source as the copies spell them.
    source = Path(openai_completions_request.__file__).read_text()
    for text in (
        _prefix_chat.TOOL_IMAGES_TEXT,
        _prefix_chat.SEE_IMAGE_TEXT,
        _prefix_chat.PROCESSED_TEXT,
    ):
        assert f'"{text}"' in source


@given(
    st.text(st.sampled_from("ab9Z_-|é "), max_size=12)
    | st.text(st.sampled_from("ab|"), min_size=38, max_size=44)
)
def test_unchanged_ids_are_the_normalisers(value: str) -> None:
    for mistral in (False, True):
        facts = facts_of(make_model(), OpenAICompat(requires_mistral_tool_ids=mistral))
        rename = normalize_tool_id(OpenAICompat(requires_mistral_tool_ids=mistral))
        assert _prefix_chat._unchanged_id(facts, value) == (rename(value) == value)


def test_the_module_imports_no_typed_code() -> None:
    # The child imports it before anything else: the standard library and orjson only.
    code = (
        "import sys; import pitrio._prefix_chat; "
        "print(sorted(m for m in sys.modules if m.startswith(('pitrio.', 'attr', 'cattrs'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pitrio._prefix_chat']"


def test_a_prefix_for_other_facts_is_not_restored() -> None:
    model, compat = make_model(), OpenAICompat()
    prefix = prepare_chat_prefix([orjson.dumps(user("hi"))], facts_of(model, compat))
    assert prefix is not None
    assert ChatMessages.from_prefix(model, compat, prefix) is not None
    assert ChatMessages.from_prefix(make_model(id="other"), compat, prefix) is None
    assert ChatMessages.from_prefix(make_model(image=False), compat, prefix) is None
    tool_names = OpenAICompat(requires_tool_result_name=True)
    assert ChatMessages.from_prefix(model, tool_names, prefix) is None


def test_nothing_converted_is_none() -> None:
    facts = facts_of(make_model(), OpenAICompat())
    assert prepare_chat_prefix([], facts) is None
    assert (
        prepare_chat_prefix([b'{"role":"bashExecution"}', orjson.dumps(user("x"))], facts) is None
    )
    assert prepare_chat_prefix([b"not json"], facts) is None


# --- the shared fixtures and made sessions ---------------------------------------------------


def _messages_in(value: Any, found: list[dict[str, Any]]) -> None:
    if isinstance(value, dict):
        if value.get("role") in CLASSES:
            found.append(value)
        for item in value.values():
            _messages_in(item, found)
    elif isinstance(value, list):
        for item in value:
            _messages_in(item, found)


def _fixture_sequences() -> list[tuple[str, list[dict[str, Any]]]]:
    """Each shared fixture file's messages (session files, RPC transcripts, contexts), in the
    order they appear."""
    out = []
    for path in sorted((SHARED / "fixtures").rglob("*.json*")):
        data = path.read_bytes()
        found: list[dict[str, Any]] = []
        for text in [data] if path.suffix == ".json" else data.splitlines():
            try:
                _messages_in(orjson.loads(text), found)
            except orjson.JSONDecodeError:
                continue
        if found:
            out.append((path.name, found))
    return out


def _identities(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The models of the transcript's responses, in order of appearance (a default if none)."""
    out = []
    for message in messages:
        if message.get("role") == "assistant":
            who = (str(message.get("provider")), str(message.get("api")), str(message.get("model")))
            if who not in out:
                out.append(who)
    return out or [("mock", "a", "m")]


def test_fixture_transcripts_convert_alike() -> None:
    sequences = _fixture_sequences()
    if not sequences:
        pytest.skip("no shared fixtures (PITRIO_SHARED_DIR)")
    converted = total = 0
    for _, messages in sequences:
        datas = [orjson.dumps(message) for message in messages]
        converted += max(check_all(datas, *who) for who in _identities(messages))
        total += len(datas)
    # Most of what pi writes is converted (what stops a prefix: another model's responses in
    # one file, rarer shapes).
    assert converted >= 0.5 * total > 0, (converted, total)


def _session_messages(turns: int, tmp_path: Path) -> list[bytes]:
    """The stored messages of a session file the resume benchmark makes, as stored."""
    tools = SHARED / "tools"
    if not (tools / "bench_rpc.py").exists():
        pytest.skip("no shared tools (PITRIO_SHARED_DIR)")
    sys.path.insert(0, str(tools))
    try:
        from bench_rpc import Harness  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tools))
    path = tmp_path / "session.jsonl"
    Harness.make_session_file(None, path, tmp_path, turns)
    out = []
    for line in path.read_bytes().splitlines():
        if b'"type":"message"' in line:
            # The message is the line's last key: its JSON as written.
            out.append(line[line.index(b'"message":{') + len(b'"message":') : -1])
    return out


def test_a_long_made_session_converts_whole(tmp_path: Path) -> None:
    datas = _session_messages(3000, tmp_path)
    model = make_model("mock", "openai-completions", "mock-model")
    for compat in (OpenAICompat(), OpenAICompat(requires_assistant_after_tool_result=True)):
        assert check(datas, model, compat) == len(datas)
    prefix = prepare_chat_prefix(datas, facts_of(model, OpenAICompat()))
    assert prefix is not None and len(prefix.segments) >= 3  # segments cut as the typed path


def test_a_made_session_for_another_model_stops_at_its_first_response(tmp_path: Path) -> None:
    datas = _session_messages(20, tmp_path)
    for model in (make_model("mock", "openai-completions", "x"), make_model("x", "a", "m")):
        assert check(datas, model, OpenAICompat()) == 1  # the user's first message only


# --- hand-made transcripts --------------------------------------------------------------------

ME = {"api": "openai-completions", "provider": "mock", "model": "m"}
USAGE = {
    "input": 10,
    "output": 5,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 15,
    "cost": {"input": 0.001, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.001},
}
PNG = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


def user(content: Any, **more: Any) -> dict[str, Any]:
    """A stored user message."""
    if isinstance(content, str) or content is None:
        return {"role": "user", "content": content, "timestamp": 1, **more}
    return {"role": "user", "content": list(content), "timestamp": 1, **more}


def text(value: str, **more: Any) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": value, **more}


def thinking(value: str, **more: Any) -> dict[str, Any]:
    """A thinking block."""
    return {"type": "thinking", "thinking": value, **more}


def call(call_id: str, name: str = "bash", arguments: Any = None, **more: Any) -> dict[str, Any]:
    """A tool call block."""
    args = {"command": "ls"} if arguments is None else arguments
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": args, **more}


def assistant(*blocks: Any, stop: str = "stop", who: Any = None, **more: Any) -> dict[str, Any]:
    """A stored assistant message of the target model (or ``who``'s)."""
    return {
        "role": "assistant",
        "content": list(blocks),
        **(who or ME),
        "usage": USAGE,
        "stopReason": stop,
        "timestamp": 2,
        **more,
    }


def result(call_id: str, *blocks: Any, name: str = "bash", **more: Any) -> dict[str, Any]:
    """A stored tool result."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": list(blocks),
        "isError": False,
        "timestamp": 3,
        **more,
    }


BIG = {"deep": [{"k": "x" * 70000, "n": [1, 2.5, -3e300, None, True]}] * 5, "é": "\u2028"}
CASES: dict[str, list[dict[str, Any]]] = {
    "call without result, then a user": [
        user("go"),
        assistant(text("a"), call("c1"), call("c2", "read")),
        result("c2", text("two")),
        user("next"),
    ],
    "calls pending at the end": [user("go"), assistant(call("c1"), call("c2"))],
    "aborted and failed responses": [
        user([text("go")]),
        assistant(call("c1"), stop="toolUse"),
        assistant(text("half"), call("c9"), stop="aborted"),
        result("c9", text("late")),
        result("c1", text("late too")),
        assistant(text("x"), stop="error", errorMessage="boom"),
        user("again"),
    ],
    "empty texts": [
        user(""),
        user([]),
        assistant(text("")),
        assistant(text(""), thinking("")),
        user([text(""), text("b")]),
        assistant(text(""), call("c1")),
        result("c1"),
        user([]),
    ],
    "thinking": [
        user("q"),
        assistant(thinking("why", thinkingSignature="s"), text("because")),
        assistant(thinking("secret", redacted=True), thinking("open", redacted=False)),
        assistant(thinking("   "), thinking("t", redacted=None), text("")),
    ],
    "tool results and what follows them": [
        user("q"),
        assistant(call("c1"), call("c2")),
        result("c1", text("one")),
        result("c2", text("two"), text("lines")),
        user("then"),
        assistant(call("c3")),
        result("c3", text("r")),
        assistant(text("done")),
        assistant(call("c4")),
        result("c4", PNG),
        user("after an image"),
    ],
    "images": [
        user([text("see"), PNG, PNG, text("and"), PNG]),
        user([text(_prefix_chat.IMAGE_OMITTED_TEXT), PNG]),
        assistant(call("c1"), call("c2")),
        result("c1", text("shot"), PNG, PNG),
        result("c2", PNG, text(_prefix_chat.TOOL_IMAGE_OMITTED_TEXT), PNG),
        assistant(text("seen")),
        assistant(call("c3")),
        result("c3", PNG),
    ],
    "images pending at the end": [user("q"), assistant(call("c1")), result("c1", PNG)],
    "unicode and big arguments": [
        user('héllo \u2028 \x00 \ud7ff 😀 \\ " </script>'),
        assistant(text("日本語"), call("c1", "write", BIG), call("c2", "x", {})),
        result("c1", text("ok ✓")),
        result("c2", text("\n")),
        user([text("x" * 300000)]),
    ],
    "ids the normaliser keeps or changes": [
        user("q"),
        assistant(call("abcdefghi"), call("|pipe"), call("a" * 40)),
        result("abcdefghi", text("1")),
        result("|pipe", text("2")),
        assistant(call("call|item")),
        result("call|item", text("3")),
        assistant(call("b" * 41)),
    ],
    "results matching no call, twice, out of order": [
        user("q"),
        result("c0", text("stray")),
        assistant(call("c1"), call("c2"), call("c1", "again")),
        result("c2", text("2")),
        result("c1", text("1")),
        result("c1", text("1 again")),
        result("c1", text("1 a third time")),
    ],
    "another model's response": [
        user("q"),
        assistant(text("mine")),
        assistant(thinking("theirs"), text("t"), who={**ME, "model": "other"}),
        user("after"),
    ],
    "another api's response": [
        user("q"),
        assistant(thinking("theirs"), text("t"), who={**ME, "api": "other"}),
    ],
    "another provider's response": [
        user("q"),
        assistant(thinking("theirs"), text("t"), who={**ME, "provider": "other"}),
    ],
    "a call id twice, one result": [
        user("q"),
        assistant(call("c1"), call("c1", "read")),
        result("c1", text("1")),
        user("next"),
    ],
    "a segment of exactly its size": [
        user("x" * (_prefix_chat.SEGMENT_BYTES - len(b'{"role":"user","content":""}'))),
        user("next"),
    ],
    "another model's failed response is left out alike": [
        user("q"),
        assistant(text("x"), stop="aborted", who={**ME, "provider": "other"}),
        user("after"),
    ],
    "unknown keys and optional fields": [
        user("q", extra={"a": 1}),
        assistant(
            text("a", textSignature="sig", more=1),
            call("c1", thoughtSignature=None, namespace="ns"),
            responseId="r",
            responseModel=None,
            durationMs=5,
            thinkingLevel="high",
            endTurn=True,
            providerThinkingLevel="x",
            rawStopReason="stop",
            unknown=[1],
        ),
        result("c1", text("r"), details={"any": [1]}, usage=USAGE, durationMs=None, mine=2),
        assistant(text("b"), usage={"input": 1, "reasoning": None, "cacheWrite1h": 3, "z": 1}),
        assistant(text("c"), usage={"cost": {"totalFromProvider": False, "input": 1}}),
        assistant(text("c"), usage={}),
    ],
    "shapes the quick decoder leaves to the general one stop the prefix": [
        user("q"),
        assistant(text("d"), diagnostics=[]),
        user("after"),
    ],
    "nested calls stop the prefix": [
        user("q"),
        assistant(call("c1")),
        result("c1", text("r"), nestedCalls=[]),
    ],
    "mistyped fields stop the prefix": [user("q"), assistant(text("a"), responseId=5)],
    "another role stops the prefix": [
        user("q"),
        {"role": "bashExecution", "command": "ls", "output": "", "timestamp": 1},
        user("after"),
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_hand_made_transcripts_convert_alike(name: str) -> None:
    messages = CASES[name]
    datas = [orjson.dumps(message) for message in messages]
    assert check_all(datas, "mock", "openai-completions", "m") >= 1


def test_what_each_hand_made_transcript_converts() -> None:
    """Where the prefix stops, so the cases test what they say (the default target)."""
    model, compat = make_model(), OpenAICompat()

    def consumed(name: str, target: Any = None) -> int:
        datas = [orjson.dumps(message) for message in CASES[name]]
        return check(datas, *(target or (model, compat)))

    for name, messages in CASES.items():
        if "stop" not in name and "another" not in name and "normaliser" not in name:
            assert consumed(name) == len(messages), name
    assert consumed("another model's response") == 2
    assert consumed("another api's response") == 1
    assert consumed("another provider's response") == 1
    assert consumed("another model's failed response is left out alike") == 3
    assert consumed("shapes the quick decoder leaves to the general one stop the prefix") == 1
    assert consumed("nested calls stop the prefix") == 2
    assert consumed("mistyped fields stop the prefix") == 1
    assert consumed("another role stops the prefix") == 1
    assert consumed("ids the normaliser keeps or changes") == 4  # "call|item" is cut
    mistral = OpenAICompat(requires_mistral_tool_ids=True)
    assert consumed("ids the normaliser keeps or changes", (model, mistral)) == 1
    assert consumed("images", (model, compat, True)) == 0  # blocked images are not converted
    prefix = prepare_chat_prefix(
        [orjson.dumps(m) for m in CASES["images pending at the end"]], facts_of(model, compat)
    )
    assert prefix is not None and prefix.images == (("image/png", PNG["data"]),)
    assert prefix.pending == () and prefix.last_role == "tool"
    prefix = prepare_chat_prefix(
        [orjson.dumps(m) for m in CASES["calls pending at the end"]], facts_of(model, compat)
    )
    assert prefix is not None and prefix.pending == (("c1", "bash"), ("c2", "bash"))


def _mistyped(message: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(message)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


_A = assistant(thinking("t"), text("a"), call("c1"))
_R = result("c1", text("r"), PNG)
_U = user([text("u"), PNG])
MISTYPED = [
    *((_A, (key,), KeyError) for key in _A if key != "role"),
    *((_R, (key,), KeyError) for key in _R if key != "role"),
    *((_U, (key,), KeyError) for key in _U if key != "role"),
    (_A, ("api",), None),
    (_A, ("provider",), 1),
    (_A, ("model",), []),
    (_A, ("stopReason",), "weird"),
    (_A, ("stopReason",), ["stop"]),
    (_A, ("timestamp",), 1.0),
    (_A, ("timestamp",), True),
    (_A, ("responseId",), 5),
    (_A, ("errorMessage",), False),
    (_A, ("durationMs",), 1.5),
    (_A, ("thinkingLevel",), "huge"),
    (_A, ("thinkingLevel",), 1),
    (_A, ("endTurn",), "yes"),
    (_A, ("diagnostics",), None),
    (_A, ("usage",), "x"),
    (_A, ("usage",), None),
    (_A, ("usage", "input"), 1.0),
    (_A, ("usage", "totalTokens"), True),
    (_A, ("usage", "reasoning"), "1"),
    (_A, ("usage", "cacheWrite1h"), 1.5),
    (_A, ("usage", "cost"), None),
    (_A, ("usage", "cost", "input"), "1"),
    (_A, ("usage", "cost", "total"), True),
    (_A, ("usage", "cost", "totalFromProvider"), 0),
    (_A, ("content",), "text"),
    (_A, ("content", 0), "block"),
    (_A, ("content", 0, "type"), "redacted_thinking"),
    (_A, ("content", 0, "thinking"), None),
    (_A, ("content", 0, "redacted"), "yes"),
    (_A, ("content", 0, "thinkingSignature"), 1),
    (_A, ("content", 1, "text"), None),
    (_A, ("content", 1, "textSignature"), 1),
    (_A, ("content", 1, "type"), "image"),
    (_A, ("content", 2, "id"), 1),
    (_A, ("content", 2, "name"), None),
    (_A, ("content", 2, "arguments"), ["ls"]),
    (_A, ("content", 2, "arguments"), None),
    (_A, ("content", 2, "thoughtSignature"), 1),
    (_A, ("content", 2, "namespace"), {}),
    (_R, ("toolCallId",), 1),
    (_R, ("toolName",), None),
    (_R, ("isError",), 0),
    (_R, ("timestamp",), "3"),
    (_R, ("usage",), {"output": None}),
    (_R, ("durationMs",), "1"),
    (_R, ("nestedCalls",), None),
    (_R, ("content",), None),
    (_R, ("content", 1, "data"), 5),
    (_R, ("content", 1, "mimeType"), None),
    (_R, ("content", 0, "type"), "thinking"),
    (_U, ("content",), 5),
    (_U, ("content",), None),
    (_U, ("content", 0, "type"), "toolCall"),
    (_U, ("content", 0, "textSignature"), []),
    (_U, ("content", 1, "data"), None),
    (_U, ("timestamp",), None),
    (_U, ("role",), "system"),
]


@pytest.mark.parametrize(("message", "path", "value"), MISTYPED)
def test_a_missing_or_mistyped_field_ends_the_prefix(
    message: dict[str, Any], path: tuple[Any, ...], value: Any
) -> None:
    # After a call, so a result's call is pending; the prefix ends before the odd message.
    head = [orjson.dumps(m) for m in (user("q"), assistant(call("c1")))]
    odd = orjson.dumps(_mistyped(message, path, value))
    assert check([*head, odd, orjson.dumps(user("after"))], make_model(), OpenAICompat()) == 2
    # Each message as it was is taken.
    assert check([*head, orjson.dumps(message)], make_model(), OpenAICompat()) == 3


def test_numbers_as_written_convert_alike() -> None:
    # Arguments as the stored text spells them: both paths parse them with orjson (a huge
    # integer becomes a float, ``-0`` an int) and write them back with it.
    arguments = b'{"a":123456789012345678901234567890,"b":-0,"c":1E2,"d":-0.0,"e":1.50}'
    stored = orjson.dumps(assistant(call("c1", arguments={})))
    datas = [
        orjson.dumps(user("q")),
        stored.replace(b'"arguments":{}', b'"arguments":' + arguments),
    ]
    assert check_all(datas, "mock", "openai-completions", "m") == 2
    # Text orjson refuses (a lone surrogate escape; the typed path's parser takes it): not taken.
    lone = orjson.dumps(user("x")).replace(b'"x"', b'"\\ud800"')
    assert check([*datas, lone], make_model(), OpenAICompat()) == 2


def test_memoryviews_are_taken() -> None:
    datas = [orjson.dumps(message) for message in CASES["tool results and what follows them"]]
    joined = b"".join(datas)
    views, at = [], 0
    for data in datas:
        views.append(memoryview(joined)[at : at + len(data)])
        at += len(data)
    facts = facts_of(make_model(), OpenAICompat())
    assert prepare_chat_prefix(views, facts) == prepare_chat_prefix(datas, facts)


# --- mutations -------------------------------------------------------------------------------

POOL = [message for messages in CASES.values() for message in messages]
ODD = [None, 0, 1, -1, 1.5, 2**64 - 1, True, False, "", "x", "stop", "c1", "image/png", [], {}, [1]]


def _containers(value: Any, out: list[Any]) -> list[Any]:
    if isinstance(value, dict | list):
        out.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            _containers(item, out)
    return out


@st.composite
def transcripts(draw: st.DrawFn) -> list[bytes]:
    """A few pooled messages, each possibly mutated: a key removed, a value replaced by an
    odd one, a key added, a list item dropped."""
    messages = [
        orjson.loads(orjson.dumps(m)) for m in draw(st.lists(st.sampled_from(POOL), max_size=12))
    ]
    for _ in range(draw(st.integers(0, 4))):
        if not messages:
            break
        message = draw(st.sampled_from(messages))
        target = draw(st.sampled_from(_containers(message, [])))
        if isinstance(target, dict):
            keys = sorted(target)
            kind = draw(st.sampled_from(["remove", "replace", "add"]))
            if kind == "add" or not keys:
                target[draw(st.sampled_from(["type", "redacted", "zz", "textSignature"]))] = draw(
                    st.sampled_from(ODD).map(copy.deepcopy)
                )
            elif kind == "remove":
                del target[draw(st.sampled_from(keys))]
            else:
                target[draw(st.sampled_from(keys))] = draw(st.sampled_from(ODD).map(copy.deepcopy))
        elif target:
            del target[draw(st.integers(0, len(target) - 1))]
    return [orjson.dumps(message) for message in messages]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(0, 2 ** (2 + len(FLAGS)) - 1))
def test_mutated_transcripts_convert_alike(datas: list[bytes], which: int) -> None:
    check(datas, *targets("mock", "openai-completions", "m")[which])
