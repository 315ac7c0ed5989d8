"""The JSON-level Chat Completions prefix against the typed path: whatever prefix of a stored
transcript it converts, a builder restored from it (``ChatMessages.from_prefix``) is in the
state of a typed builder fed those messages, decoded by the general decoder: the same encoded
segments, pending calls and images, the same ``finish()`` bytes, and the same bytes again after
both are fed the rest of the transcript."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pitrio import _prefix_chat
from pitrio._prefix_chat import prepare_chat_prefix
from pitrio.actors.model_router.providers import convert, openai_completions_request
from pitrio.actors.model_router.providers.openai_compat import OpenAICompat, normalize_tool_id
from pitrio.actors.model_router.providers.openai_completions_request import (
    ChatMessages,
    facts_of,
)
from pitrio.messages.agent import StopReason, ThinkingLevel
from tests.messages.test_quick import messages_in
from tests.prefix_chat_support import (
    PNG,
    assistant,
    call,
    check,
    check_all,
    make_model,
    result,
    text,
    user,
)
from tests.shared_dir import SHARED

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
    for literal in (
        _prefix_chat.TOOL_IMAGES_TEXT,
        _prefix_chat.SEE_IMAGE_TEXT,
        _prefix_chat.PROCESSED_TEXT,
    ):
        assert f'"{literal}"' in source


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


def _fixture_sequences() -> list[tuple[str, list[dict[str, Any]]]]:
    """Each shared fixture file's messages (session files, RPC transcripts, contexts), in the
    order they appear."""
    out = []
    for path in sorted((SHARED / "fixtures").rglob("*.json*")):
        data = path.read_bytes()
        found: list[dict[str, Any]] = []
        for line in [data] if path.suffix == ".json" else data.splitlines():
            try:
                messages_in(orjson.loads(line), found)
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
    messages = [user("q"), assistant(call("c1")), result("c1", text("r"), PNG), user("x")]
    datas = [orjson.dumps(message) for message in messages]
    joined = b"".join(datas)
    views, at = [], 0
    for data in datas:
        views.append(memoryview(joined)[at : at + len(data)])
        at += len(data)
    facts = facts_of(make_model(), OpenAICompat())
    assert prepare_chat_prefix(views, facts) == prepare_chat_prefix(datas, facts)
