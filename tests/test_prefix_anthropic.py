"""The JSON-level Anthropic Messages prefix against the typed path: whatever prefix of a stored
transcript it converts, a builder restored from it (``AnthropicTurns.from_prefix``) is in the
state of a typed builder fed those messages, decoded by the general decoder: the same encoded
segments, open turns, newest user turn and pending calls, the same ``finish()`` bytes with and
without the cache mark, and the same again after both are fed the rest of the transcript."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pitrio import _prefix_anthropic
from pitrio._prefix_anthropic import prepare_anthropic_prefix
from pitrio.actors.model_router.providers import anthropic, anthropic_forms
from pitrio.actors.model_router.providers.anthropic import AnthropicTurns, facts_of
from tests.prefix_anthropic_support import check, check_all
from tests.prefix_chat_support import PNG, assistant, call, make_model, result, text, user
from tests.test_prefix_chat import _fixture_sequences, _identities, _session_messages


def test_copies_are_the_typed_paths() -> None:
    assert _prefix_anthropic.ID_INVALID.pattern == anthropic._ID_INVALID.pattern
    # The placeholder of a result of images only, found in the typed module as spelled here.
    source = Path(anthropic_forms.__file__).read_text()
    assert f'"{_prefix_anthropic.SEE_IMAGE_TEXT}"' in source


@given(st.text(st.sampled_from("ab9Z_-|é .\u0130"), max_size=70))
def test_the_id_rewrite_is_the_typed_paths(value: str) -> None:
    assert _prefix_anthropic.normalize_tool_id(value) == anthropic.normalize_tool_id(value)


def test_the_module_imports_no_typed_code() -> None:
    # For the launcher's child, which imports nothing of pitrio's typed code: the standard
    # library, orjson and the Chat module whose checks it shares.
    code = (
        "import sys; import pitrio._prefix_anthropic; "
        "print(sorted(m for m in sys.modules if m.startswith(('pitrio.', 'attr', 'cattrs'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pitrio._prefix_anthropic', 'pitrio._prefix_chat']"


def test_a_prefix_for_other_facts_is_not_restored() -> None:
    model = make_model()
    prefix = prepare_anthropic_prefix([orjson.dumps(user("hi"))], facts_of(model))
    assert prefix is not None
    assert AnthropicTurns.from_prefix(model, prefix) is not None
    assert AnthropicTurns.from_prefix(make_model(id="other"), prefix) is None
    assert AnthropicTurns.from_prefix(make_model(provider="other"), prefix) is None
    assert AnthropicTurns.from_prefix(make_model(api="other"), prefix) is None
    assert AnthropicTurns.from_prefix(make_model(image=False), prefix) is None


def test_nothing_converted_is_none() -> None:
    facts = facts_of(make_model())
    assert prepare_anthropic_prefix([], facts) is None
    assert prepare_anthropic_prefix([b'{"role":"custom"}', orjson.dumps(user("x"))], facts) is None
    assert prepare_anthropic_prefix([b"not json"], facts) is None
    assert prepare_anthropic_prefix([None], facts) is None  # a text the view could not cut out


def test_fixture_transcripts_convert_alike() -> None:
    sequences = _fixture_sequences()
    if not sequences:
        pytest.skip("no shared fixtures (PITRIO_SHARED_DIR)")
    converted = total = 0
    for _, messages in sequences:
        datas = [orjson.dumps(message) for message in messages]
        converted += max(check_all(datas, *who) for who in _identities(messages))
        total += len(datas)
    # Most of what pi writes is converted (another model's responses too, here).
    assert converted >= 0.7 * total > 0, (converted, total)


def test_a_long_made_session_converts_whole(tmp_path: Path) -> None:
    datas = _session_messages(3000, tmp_path)
    # As the model that answered in it, and as another one (its responses then foreign).
    for model_id in ("mock-model", "claude"):
        model = make_model("mock", "openai-completions", model_id)
        assert check(datas, model) == len(datas)
    prefix = prepare_anthropic_prefix(datas, facts_of(make_model()))
    assert prefix is not None and len(prefix.segments) >= 3  # segments cut as the typed path
    assert prefix.newest_user == 0 and len(prefix.turns) == 2  # the last user turn, its answer


def test_numbers_and_surrogates_as_written_convert_alike() -> None:
    arguments = b'{"a":123456789012345678901234567890,"b":-0,"c":1E2,"d":-0.0,"e":1.50}'
    stored = orjson.dumps(assistant(call("c1", arguments={})))
    datas = [
        orjson.dumps(user("q")),
        stored.replace(b'"arguments":{}', b'"arguments":' + arguments),
    ]
    assert check_all(datas, "mock", "openai-completions", "m") == 2
    lone = orjson.dumps(user("x")).replace(b'"x"', b'"\\ud800"')
    assert check([*datas, lone], make_model()) == 2


def test_memoryviews_are_taken() -> None:
    messages = [user("q"), assistant(call("c1")), result("c1", text("r"), PNG), user("x")]
    datas = [orjson.dumps(message) for message in messages]
    joined = b"".join(datas)
    views, at = [], 0
    for data in datas:
        views.append(memoryview(joined)[at : at + len(data)])
        at += len(data)
    facts = facts_of(make_model())
    assert prepare_anthropic_prefix(views, facts) == prepare_anthropic_prefix(datas, facts)
