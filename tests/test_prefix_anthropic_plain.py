"""A threaded (or OAuth threaded) session's plain turns restored from the JSON-level prefix
(``PlainTurns.restored``) against a plain builder fed the typed messages: the same request
bytes with and without the cache mark, the same fingerprint chain, before and after both are
fed the rest of the transcript (issue 38: a resumed session's first threaded request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio._prefix_anthropic import prepare_anthropic_prefix
from pitrio.actors.model_router.providers.anthropic import facts_of
from pitrio.actors.model_router.providers.anthropic_plain import PlainTurns
from pitrio.actors.model_router.providers.anthropic_threads import chain_of
from pitrio.actors.model_router.providers.claude_code import claude_code_name
from pitrio.actors.model_router.providers.convert import body_bytes, encode_json_pieces
from pitrio.messages.model import Model
from pitrio.messages.wire import loads
from tests.prefix_anthropic_support import CACHES, targets
from tests.prefix_chat_support import _decoded, assistant, call, make_model, user
from tests.test_prefix_chat import _fixture_sequences, _identities, _session_messages


def _state(builder: PlainTurns) -> Any:
    out = []
    for cache in CACHES:
        turns, chain_at = builder.request_turns(cache)
        counts = sorted({0, 1, len(turns) // 2, len(turns) - 1, len(turns)} - {-1})
        out.append(
            (
                body_bytes(encode_json_pieces({"messages": turns})),
                [chain_at(count) for count in counts],
            )
        )
    return out, builder.newest_user, [(c.id, c.name) for c in builder.preparer.pending]


def check(datas: list[bytes], model: Model, block: bool, *, oauth: bool) -> int:
    """Restored against typed on ``datas``; how many messages the prefix converted."""
    prefix = prepare_anthropic_prefix(datas, facts_of(model, block_images=block))
    if prefix is None:
        return 0
    rename = claude_code_name if oauth else None
    typed = PlainTurns(model, rename=rename)
    values = [loads(data) for data in datas]
    for value in values[: prefix.consumed]:
        message = _decoded(value, block)
        assert message is not None
        typed.feed(message)
    restored = PlainTurns.restored(model, prefix, rename)
    assert restored is not None
    assert _state(restored) == _state(typed)
    turns = restored.request_turns(None)[0]
    assert chain_of(list(turns)) == restored.request_turns(None)[1](len(turns))
    rest = [m for m in (_decoded(v, block) for v in values[prefix.consumed :]) if m is not None]
    for message in rest:
        typed.feed(message)
        restored.feed(message)
    assert _state(restored) == _state(typed)
    return prefix.consumed


@pytest.mark.parametrize("oauth", [False, True])
def test_fixture_transcripts_restore_alike(oauth: bool) -> None:
    sequences = _fixture_sequences()
    if not sequences:
        pytest.skip("no shared fixtures (PITRIO_SHARED_DIR)")
    converted = 0
    for _, messages in sequences:
        datas = [orjson.dumps(message) for message in messages]
        for who in _identities(messages):
            for model, block in targets(*who)[:4]:  # own and another model, images or not
                converted += check(datas, model, block, oauth=oauth)
    assert converted > 0


def test_a_made_session_and_numbers_as_written(tmp_path: Path) -> None:
    datas = _session_messages(300, tmp_path)
    model = make_model("mock", "openai-completions", "mock-model")
    assert check(datas, model, False, oauth=True) == len(datas)
    arguments = b'{"a":123456789012345678901234567890,"b":-0,"c":1E2,"d":-0.0,"e":1.50}'
    stored = orjson.dumps(assistant(call("c1", arguments={})))
    numbers = [
        orjson.dumps(user("q")),
        stored.replace(b'"arguments":{}', b'"arguments":' + arguments),
        orjson.dumps(user("next")),
    ]
    for oauth in (False, True):
        assert check(numbers, make_model(), False, oauth=oauth) == 3


def test_a_prefix_for_other_facts_is_not_restored() -> None:
    datas = [orjson.dumps(user("q"))]
    prefix = prepare_anthropic_prefix(datas, facts_of(make_model()))
    assert prefix is not None
    other = make_model("mock", "a", "another-model")
    assert PlainTurns.restored(other, prefix) is None
