"""The JSON-level Chat Completions prefix against the typed path on hand-made transcripts, every
field made missing or mistyped, and hypothesis mutations (see ``test_prefix_chat``)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitrio import _prefix_chat
from pitrio._prefix_chat import prepare_chat_prefix
from pitrio.actors.model_router.providers.openai_compat import OpenAICompat
from pitrio.actors.model_router.providers.openai_completions_request import (
    facts_of,
)
from tests.prefix_chat_support import (
    FLAGS,
    ME,
    PNG,
    USAGE,
    assistant,
    call,
    check,
    check_all,
    make_model,
    result,
    targets,
    text,
    thinking,
    user,
)

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
