"""The Anthropic Messages prefix made by the launcher's parsing child (``kind="anthropic"``;
see ``test_preparse_prefix`` for the Chat one and the child's lifetimes): its answer is
``prepare_anthropic_prefix`` run here over the messages the child certified, the open turns
(JSON values through ``marshal``) included; a builder restored from it is the typed builder's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from pitrio import _preparse_child as preparse_child
from pitrio._prefix_anthropic import AnthropicFacts, AnthropicPrefix, prepare_anthropic_prefix
from pitrio.actors.model_router.providers.anthropic import AnthropicTurns, facts_of
from tests.prefix_anthropic_support import check
from tests.prefix_chat_support import assistant, call, make_model, thinking, user
from tests.test_preparse_prefix import (
    _made_session,
    answered,
    ask,
    certified,
    conversation,
    forked_kept,
    message_lines,
    no_child_left,
    reaped,
    session_file,
    spawned_kept,
)

__all__ = ["no_child_left"]  # the autouse fixture: every child discarded and released


def _variants() -> list[AnthropicFacts]:
    return [
        facts_of(make_model("mock", "openai-completions", "m")),
        facts_of(make_model("mock", "anthropic-messages", "m", image=False)),
        facts_of(make_model("mock", "openai-completions", "m"), block_images=True),
    ]


def _odd_arguments() -> list[dict[str, object]]:
    """Messages whose open turns hold every JSON kind (marshal must keep each as it is)."""
    arguments = {"s": "é\u2028", "i": 2**64 - 1, "f": -0.0, "n": None, "b": True, "l": [1, [2.5]]}
    return [
        user("last"),
        assistant(thinking("t", thinkingSignature="sig"), call("c|1", "x", arguments)),
    ]  # the call's turn open at the end, its result pending


@pytest.mark.parametrize("variant", range(3))
def test_the_childs_prefix_is_the_one_made_in_process(tmp_path: Path, variant: int) -> None:
    path = session_file(tmp_path / "s.jsonl", [*conversation(40), *_odd_arguments()])
    facts = _variants()[variant]
    lines = message_lines(path)
    offer = forked_kept(path)
    job = ask(tuple(facts), lines, kind="anthropic")
    assert job is not None
    prefix = answered(job)
    expected = prepare_anthropic_prefix(certified(path, lines), facts)
    assert expected is not None and prefix == expected
    assert type(prefix) is AnthropicPrefix and type(prefix.facts) is AnthropicFacts
    assert all(type(segment) is bytes for segment in prefix.segments)
    if not facts.block_images:
        assert prefix.pending == (("c_1", "x"),) and len(prefix.turns) == 2
    assert [orjson.dumps(turn) for turn in prefix.turns] == [
        orjson.dumps(turn) for turn in expected.turns
    ]  # dict order and number kinds kept
    # Blocked images stop at the first (turn 2's result); otherwise every message is taken.
    assert prefix.consumed == (10 if facts.block_images else len(lines))
    assert reaped(offer)
    # A builder made from the child's answer is the typed builder's (checked from the texts).
    model = make_model("mock", facts.api, facts.model_id, image=facts.images)
    assert AnthropicTurns.from_prefix(model, prefix) is not None
    assert check(certified(path, lines), model, facts.block_images) == prefix.consumed


def test_a_long_made_session_from_the_launchers_own_child(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    _made_session(5000, path)
    lines = message_lines(path)
    messages = certified(path, lines)
    assert len(messages) == len(lines) == 12_000
    facts = facts_of(make_model("mock", "anthropic-messages", "mock-model"))
    offer = spawned_kept(path)
    job = ask(tuple(facts), lines, kind="anthropic")
    assert job is not None
    prefix = answered(job)
    assert prefix is not None and prefix == prepare_anthropic_prefix(messages, facts)
    assert prefix.consumed == len(lines) and len(prefix.segments) >= 5
    assert reaped(offer)


@pytest.mark.parametrize("threads", [False, True])
def test_the_session_asks_with_or_without_threads(tmp_path: Path, threads: bool) -> None:
    # A threaded endpoint's first request is built from the prefix too (anthropic_plain), so
    # the child is asked there as well.
    import attrs

    from pitrio import _preparse as preparse
    from pitrio.actors.session.resumed_prefix import request_resumed_prefix
    from pitrio.actors.session_store.projection import Projection
    from pitrio.actors.session_store.storage import read_session
    from pitrio.actors.session_store.tree import SessionTree

    path = session_file(tmp_path / "s.jsonl", conversation(5))
    offer = forked_kept(path)
    parsed = read_session(path)
    assert parsed is not None and parsed.header is not None
    tree = SessionTree(parsed.header, parsed.entries, new_id=lambda _: "x", index=parsed.index)
    messages = Projection(tree.path()).context().messages
    model = make_model("mock", "anthropic-messages", "m")
    if threads:
        model = attrs.evolve(model, compat={"supportsMessageThreads": True})
    resumed = request_resumed_prefix(messages, model, block_images=False)
    assert resumed is not None and preparse._KEPT == []
    job = resumed._job
    assert job is not None
    prefix = answered(job)  # type: ignore[arg-type]
    assert isinstance(prefix, AnthropicPrefix) and prefix.consumed == len(messages)
    assert reaped(offer)


def test_another_kind_makes_no_answer(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(3))
    offer = forked_kept(path)
    job = ask(tuple(_variants()[0]), message_lines(path), kind="responses")
    assert job is not None and answered(job) is None
    assert reaped(offer)
    assert preparse_child.prefix_answer(-1, [], (), [], None, "anthropic") == []


def test_the_childs_anthropic_side_imports_only_the_standard_library() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        before = set(sys.modules)
        import pitrio._preparse_child, pitrio._prefix_anthropic
        print(json.dumps(sorted(set(sys.modules) - before)))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    names = orjson.loads(out.stdout)
    top = {name.partition(".")[0] for name in names}
    assert sorted(top - set(sys.stdlib_module_names) - {"pitrio"}) == ["orjson"]
    assert {n for n in names if n.startswith("pitrio")} == {
        "pitrio",
        "pitrio._preparse",
        "pitrio._preparse_guess",
        "pitrio._preparse_child",
        "pitrio._prefix_anthropic",
        "pitrio._prefix_chat",
    }
