"""The JSON-level Anthropic Messages prefix against the typed path on hand-made transcripts (the
Chat ones and the Messages API's own shapes), every field made missing or mistyped, and
hypothesis mutations (see ``test_prefix_anthropic``)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitrio._prefix_anthropic import SEGMENT_BYTES, prepare_anthropic_prefix
from pitrio.actors.model_router.providers.anthropic import facts_of
from tests.prefix_anthropic_support import check, check_all, targets
from tests.prefix_chat_support import (
    ME,
    PNG,
    assistant,
    call,
    make_model,
    result,
    text,
    thinking,
    user,
)
from tests.test_prefix_chat_cases import CASES as CHAT_CASES
from tests.test_prefix_chat_cases import MISTYPED, ODD, _containers, _mistyped

OTHER = {**ME, "model": "other"}
CASES: dict[str, list[dict[str, Any]]] = {
    "thinking of the model itself": [
        user("q"),
        assistant(thinking("why", thinkingSignature="sig"), text("because")),
        assistant(thinking("", thinkingSignature="sig"), thinking("   ", thinkingSignature="")),
        assistant(thinking("hidden", redacted=True, thinkingSignature="opaque")),
        assistant(
            thinking("hidden", redacted=True), thinking("x", redacted=True, thinkingSignature="")
        ),
        assistant(thinking("cut off"), thinking("  \n"), thinking("t", redacted=None)),
        assistant(thinking("t", redacted=False, thinkingSignature=None), text(" ")),
        user("after"),
    ],
    "thinking of another model": [
        user("q"),
        assistant(thinking("theirs", thinkingSignature="sig"), text("t"), who=OTHER),
        assistant(thinking("hidden", redacted=True, thinkingSignature="opaque"), who=OTHER),
        assistant(thinking(" "), text(" "), call("c1"), who=OTHER, stop="toolUse"),
        result("c1", text("r")),
        assistant(thinking("mine", thinkingSignature="s"), text("a")),
    ],
    "blank texts": [
        user(" \n\t"),
        user([text(" "), text("")]),
        user([text(" "), text("b")]),
        assistant(text("\u2003"), text("")),
        user("\u00a0x"),
    ],
    "results grouped in one user turn": [
        user("q"),
        assistant(call("c1"), call("c2"), call("c3")),
        result("c2", text("two")),
        result("c1", text("one"), text(""), text("lines"), isError=True),
        user("next"),  # c3 gets its synthetic result first, in the same turn
        assistant(call("c4")),
        result("c4", text("r")),
        assistant(call("c5")),  # c4's turn is closed: c5's result opens another
        result("c5"),
    ],
    "synthetic results before a response": [
        user("q"),
        assistant(call("c1"), call("c2")),
        result("c1", text("one")),
        assistant(text("moved on")),
        assistant(call("c3")),
        assistant(text("again"), stop="aborted"),
        user("then"),
    ],
    "result images": [
        user("q"),
        assistant(call("c1"), call("c2"), call("c3")),
        result("c1", PNG),
        result("c2", PNG, PNG, text("shot"), text("")),
        result("c3", text("(tool image omitted: model does not support images)"), PNG, PNG),
        user([PNG, text("(image omitted: model does not support images)"), PNG, text("x")]),
    ],
    "ids the rewrite changes": [
        user("q"),
        assistant(call("call_1|fc_2"), call("a.b"), call("x" * 70), call(""), call("é")),
        result("call_1|fc_2", text("1")),
        result("call_1_fc_2", text("1 again, by its rewritten id")),
        result("x" * 64, text("3, by the cut id")),
        result("?", text("4, by its rewritten id")),
        result("", text("5")),
        user("after"),
        assistant(call("a|b"), call("a.b")),  # two ids rewritten alike
        result("a_b", text("first")),
        result("a.b", text("second")),
    ],
    "a first turn of no user": [
        assistant(text("hello")),
        assistant(call("c1")),
        result("c1", text("r")),
        result("c1", text("again")),
    ],
    "a call id twice, one result, at the end": [
        user("q"),
        assistant(call("c1"), call("c1", "read")),
        result("c1", text("1")),
    ],
    "a segment of exactly its size": [
        user("x" * (SEGMENT_BYTES - len(b'{"role":"user","content":[{"type":"text","text":""}]}'))),
        user("next"),
        user("and a turn after the segment"),
    ],
    "only a failed response": [assistant(text("x"), stop="error")],
    "a lone user turn of nothing": [user(" ")],
}


def _datas(messages: list[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(message) for message in messages]


@pytest.mark.parametrize("name", [*CASES, *(f"chat: {name}" for name in CHAT_CASES)])
def test_hand_made_transcripts_convert_alike(name: str) -> None:
    messages = CASES[name] if name in CASES else CHAT_CASES[name.removeprefix("chat: ")]
    assert check_all(_datas(messages), "mock", "openai-completions", "m") >= 1


def test_what_each_hand_made_transcript_converts() -> None:
    """Where the prefix stops, so the cases test what they say (the model itself, images
    allowed and not blocked; ``block``: blocked)."""

    def consumed(messages: list[dict[str, Any]], model_id: str = "m", block: bool = False) -> int:
        return check(_datas(messages), make_model("mock", "openai-completions", model_id), block)

    for name, messages in CASES.items():
        assert consumed(messages) == len(messages), name
        assert consumed(messages, "other") == len(messages), name
    stops = {
        "shapes the quick decoder leaves to the general one stop the prefix": 1,
        "nested calls stop the prefix": 2,
        "mistyped fields stop the prefix": 1,
        "another role stops the prefix": 1,
    }
    for name, messages in CHAT_CASES.items():
        assert consumed(messages) == stops.get(name, len(messages)), name
    assert consumed(CASES["result images"], block=True) == 2  # blocked images are not taken
    assert consumed(CHAT_CASES["images"], block=True) == 0
    assert consumed(CASES["results grouped in one user turn"], block=True) == 9
    prefix = prepare_anthropic_prefix(
        _datas(CASES["results grouped in one user turn"][:4]), facts_of(make_model())
    )
    assert prefix is not None and prefix.pending == (("c3", "bash"),)
    assert prefix.items == 2 and prefix.newest_user == 0  # the question and the calls: final
    assert prefix.turns[0]["tool_results"] is True and len(prefix.turns[0]["content"]) == 2
    prefix = prepare_anthropic_prefix(
        _datas(CASES["a first turn of no user"]), facts_of(make_model())
    )
    assert prefix is not None and prefix.items == 2 and prefix.newest_user == 0
    prefix = prepare_anthropic_prefix(
        _datas(CASES["a first turn of no user"][:2]), facts_of(make_model())
    )
    assert prefix is not None and prefix.items == 0 and prefix.newest_user == -1
    assert prefix.pending == (("c1", "bash"),)  # the two answers stay open: no user turn yet


@pytest.mark.parametrize(("message", "path", "value"), MISTYPED)
def test_a_missing_or_mistyped_field_ends_the_prefix(
    message: dict[str, Any], path: tuple[Any, ...], value: Any
) -> None:
    # After a call, so a result's call is pending; the prefix ends before the odd message.
    head = _datas([user("q"), assistant(call("c1"))])
    odd = orjson.dumps(_mistyped(message, path, value))
    for model_id in ("m", "other"):
        model = make_model("mock", "openai-completions", model_id)
        assert check([*head, odd, orjson.dumps(user("after"))], model) == 2
        assert check([*head, orjson.dumps(message)], model) == 3  # as it was: taken


# --- mutations -------------------------------------------------------------------------------

POOL = [
    message
    for messages in (*CASES.values(), *CHAT_CASES.values())
    for message in messages
    if len(orjson.dumps(message)) < 10000  # not the big ones: many examples, quickly
]


@st.composite
def transcripts(draw: st.DrawFn) -> list[bytes]:
    """A few pooled messages, each possibly mutated: a key removed, a value replaced by an
    odd one, a key added, a list item dropped."""
    messages = [copy.deepcopy(m) for m in draw(st.lists(st.sampled_from(POOL), max_size=12))]
    for _ in range(draw(st.integers(0, 4))):
        if not messages:
            break
        message = draw(st.sampled_from(messages))
        target = draw(st.sampled_from(_containers(message, [])))
        if isinstance(target, dict):
            keys = sorted(target)
            kind = draw(st.sampled_from(["remove", "replace", "add"]))
            if kind == "add" or not keys:
                key = draw(st.sampled_from(["type", "redacted", "thinkingSignature", "zz"]))
                target[key] = draw(st.sampled_from(ODD).map(copy.deepcopy))
            elif kind == "remove":
                del target[draw(st.sampled_from(keys))]
            else:
                target[draw(st.sampled_from(keys))] = draw(st.sampled_from(ODD).map(copy.deepcopy))
        elif target:
            del target[draw(st.integers(0, len(target) - 1))]
    return _datas(messages)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(0, 7))
def test_mutated_transcripts_convert_alike(datas: list[bytes], which: int) -> None:
    check(datas, *targets("mock", "openai-completions", "m")[which])
