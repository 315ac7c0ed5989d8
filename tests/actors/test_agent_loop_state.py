"""The agent loop's state snapshots: a state's transcript shares the previous state's messages
and copies only what was added (issue 38: per-turn cost flat in the session's length)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from pitrio.actors.agent_loop import AgentState, BeforeToolCallContext, LoopHooks
from pitrio.actors.agent_loop.hooks import TurnContext
from pitrio.actors.agent_loop.state import TranscriptView
from pitrio.actors.model_router import FauxReply, FauxToolCall
from pitrio.actors.tool_executor import AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.hooks import AfterToolCallContext
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    LlmMessage,
    SystemMessage,
    Usage,
    user_message,
)
from pitrio.messages.content import TextContent
from pitrio.messages.convert import ConvertedView, PrefixConverter, extends
from pitrio.messages.snapshot import Snapshot
from tests.messages.stored_view import StoredView

from .conftest import running_loop


def chunks(messages: Sequence[AgentMessage]) -> tuple[tuple[AgentMessage, ...], ...]:
    assert isinstance(messages, Snapshot)
    return messages._chunks


async def test_a_state_extends_the_previous_states_transcript_without_copying_it() -> None:
    long = [user_message(str(i)) for i in range(1000)]
    async with running_loop("one", "two", messages=long) as fx:
        first = (await fx.loop.state()).messages
        await fx.loop.prompt("a")
        second = (await fx.loop.state()).messages
        assert list(second) == [*long, *second[1000:]] and len(second) == 1002
        # The 1,000 messages are the first state's chunk itself, not a copy of it.
        assert chunks(second)[0] is chunks(first)[0]
        assert isinstance(second, Snapshot) and second.starts_with(first)
        again = (await fx.loop.state()).messages
        assert again is second  # nothing added: the same snapshot
        await fx.loop.append_message(user_message("appended"))
        await fx.loop.prompt("b")
        third = (await fx.loop.state()).messages
        assert isinstance(third, Snapshot) and third.starts_with(first)  # states skipped
        assert chunks(third)[0] is chunks(first)[0] and len(third) == 1005
        assert extends(first, third)  # what the driver's replay asks, answered by the line
        # What a state handed out holds never changes.
        assert len(first) == 1000 and list(second[:1000]) == long


def _stored_session(count: int) -> StoredView:
    answer = AssistantMessage(
        content=(TextContent(text="ok"),), api="a", provider="p", model="m", usage=Usage(),
        stop_reason="stop", timestamp=1,
    )  # fmt: skip
    return StoredView([*(user_message(str(i)) for i in range(count - 1)), answer])


def _converting_hooks(**more: Any) -> LoopHooks:
    converter = PrefixConverter()

    async def convert(messages: Sequence[AgentMessage]) -> Sequence[LlmMessage]:
        return converter.convert(messages)

    return LoopHooks(convert_to_llm=convert, **more)


async def test_a_resumed_transcript_stays_a_view_whose_added_messages_extend_the_last() -> None:
    # A resumed session's stored part is read by no run or state (issue 38): states hold a
    # view of it, each view's added messages a snapshot extending the previous state's.
    stored = _stored_session(500)
    async with running_loop("one", "two", messages=stored, hooks=_converting_hooks()) as fx:
        first = (await fx.loop.state()).messages_view
        await fx.loop.prompt("a")
        second = (await fx.loop.state()).messages_view
        await fx.loop.prompt("b")
        third = (await fx.loop.state()).messages_view
        assert isinstance(third, TranscriptView) and third.base is stored
        assert isinstance(third.tail, Snapshot) and third.tail.starts_with(second.tail)  # type: ignore[attr-defined]
        assert extends(first, third) and extends(second, third) and not extends(third, second)
        # The requests' snapshots are headed by the stored view, converted as a view (the
        # faux provider then reads it all, for its token counts: a real one need not).
        sent = fx.faux.last_request.context.messages
        assert isinstance(sent, Snapshot) and isinstance(sent.head(), ConvertedView)
        assert sent.head()._source is stored  # type: ignore[union-attr]
        assert len(third) == 504 and [m.role for m in third.tail] == ["user", "assistant"] * 2
        assert list(third)[:500] == list(stored._messages)


@pytest.mark.parametrize("hooked", [False, True])
async def test_a_tool_turn_reads_the_transcript_only_where_a_hook_reads_it(hooked: bool) -> None:
    # A resumed session's first tool call: the tool-call and turn-end hooks get the
    # transcript as a view; the stored part is decoded only where a hook reads (issue 38).
    stored = _stored_session(100)
    reads_at_call: list[int] = []
    seen: list[tuple[str, int, str, str]] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        reads_at_call.append(stored.reads.count(0))
        return text_result("done")

    async def before(context: BeforeToolCallContext) -> None:
        # The length and the last message (the call's response) read nothing stored.
        seen.append(("before", len(context.context), context.context[-1].role, ""))

    async def after(context: AfterToolCallContext) -> None:
        first = context.context[0]  # read: decoded here, and the stored message itself
        assert first is stored._messages[0]
        seen.append(("after", len(context.context), context.context[-1].role, ""))

    async def turn_end(context: TurnContext) -> bool:
        texts = [m.content[0].text for m in context.context[:2]]  # type: ignore[union-attr]
        seen.append(("turn_end", len(context.context), context.context[-1].role, texts[1]))
        return False

    hooks = (
        _converting_hooks(before_tool_call=before, after_tool_call=after)
        if hooked
        else _converting_hooks(should_stop_after_turn=turn_end)
    )
    replies = (FauxReply(tool_calls=[FauxToolCall("echo", {})]), "after")
    tool = AgentTool(name="echo", execute=execute)
    async with running_loop(*replies, tools=[tool], messages=stored, hooks=hooks) as fx:
        await fx.loop.prompt("go")
    # The first request read the first stored message once (the faux model reads the whole
    # request; the converted view keeps what it built); no hook read it before the call.
    assert reads_at_call == [1]
    assert stored.reads.count(50) == 1  # a message no hook read: by the first request alone
    # The hooks' context: the 100 stored, the tools' system message, the prompt, the call
    # (and at the turn's end its result).
    if hooked:
        assert seen == [("before", 103, "assistant", ""), ("after", 103, "assistant", "")]
        assert stored.reads.count(0) == 2  # ``after`` read it
    else:
        assert seen == [("turn_end", 104, "toolResult", "1"), ("turn_end", 105, "assistant", "1")]


@pytest.mark.parametrize("wanted", [False, True])
async def test_a_context_hook_with_nothing_to_do_is_not_given_a_copy(wanted: bool) -> None:
    # ``wants`` says the transform has no handler: it is not called and the stored part is
    # not copied into a list for it (an extension host without context handlers, issue 38).
    stored = _stored_session(100)
    given: list[int] = []

    async def transform(messages: list[AgentMessage]) -> list[AgentMessage]:
        given.append(len(messages))
        return messages

    asked: list[str] = []

    def wants(hook: str) -> bool:
        asked.append(hook)
        return wanted

    hooks = _converting_hooks(transform_context=transform, wants=wants)
    async with running_loop("one", messages=stored, hooks=hooks) as fx:
        await fx.loop.prompt("go")
        sent = fx.faux.last_request.context.messages
    assert asked == ["transform_context"]
    assert given == ([101] if wanted else [])  # the 100 stored and the prompt
    # Copied for the hook, the request is a list's conversion; otherwise the stored view's.
    assert isinstance(sent, Snapshot) and isinstance(sent.head(), ConvertedView) is not wanted


async def test_any_change_but_appending_starts_a_new_chain() -> None:
    a, b, c = (user_message(text) for text in "abc")
    async with running_loop() as fx:
        await fx.loop.set_messages([a, b])
        before = (await fx.loop.state()).messages
        assert await fx.loop.replace_message(a, c)
        replaced = (await fx.loop.state()).messages
        assert list(replaced) == [c, b] and list(before) == [a, b]
        assert not (isinstance(replaced, Snapshot) and replaced.starts_with(before))
        assert not extends(before, replaced)
        await fx.loop.set_messages([a])
        reset = (await fx.loop.state()).messages
        assert list(reset) == [a] and not extends(replaced, reset)
        await fx.loop.append_message(b)
        grown = (await fx.loop.state()).messages
        assert isinstance(grown, Snapshot) and grown.starts_with(reset) and list(grown) == [a, b]
        await fx.loop.reset()
        assert (await fx.loop.state()).messages == ()


async def test_the_states_transcript_behaves_as_an_immutable_sequence() -> None:
    # Its readers' contract (the SDK's values): a sequence equal to the tuple of its
    # messages, indexable and sliceable, with no way to change it.
    messages = [user_message(text) for text in "abc"]
    async with running_loop(messages=messages) as fx:
        state = await fx.loop.state()
        transcript = state.messages
        assert transcript == tuple(messages) and tuple(messages) == transcript
        assert transcript[-1] is messages[-1] and transcript[1:] == tuple(messages[1:])
        assert len(transcript) == 3 and list(reversed(transcript)) == messages[::-1]
        assert not hasattr(transcript, "append") and not hasattr(transcript, "__setitem__")
        with pytest.raises(TypeError):
            transcript[0] = messages[1]  # type: ignore[index]
        assert state == await fx.loop.state()
        assert isinstance(state, AgentState) and await state.load_messages() is transcript


async def test_the_published_count_of_system_changes_moves_with_what_may_change_a_replay() -> None:
    """``LoopFacts.system_changes`` (the session's prompt-section check reads no state while
    it stays): the same after appending messages that are not system ones and after a run
    that adds none; raised by a system message appended (by a command or by a run), a
    replaced transcript, a replaced message and a reset; never part of the facts' equality."""
    a, b, c = (user_message(text) for text in "abc")
    declared = SystemMessage(content="", sections={"cwd": "/w"}, timestamp=1)
    async with running_loop("answer") as fx:

        def count() -> int:
            return fx.loop.facts().system_changes

        await fx.loop.set_messages([a])
        start = count()
        await fx.loop.append_message(b)
        await fx.loop.prompt("hi")
        assert count() == start
        await fx.loop.append_message(declared)
        after_append = count()
        assert after_append > start
        await fx.loop.prompt([declared, c])
        after_run = count()
        assert after_run > after_append
        assert await fx.loop.replace_message(a, c)
        assert count() > after_run
        replaced = count()
        await fx.loop.set_messages([a])
        assert count() > replaced
        reset_from = count()
        await fx.loop.reset()
        assert count() > reset_from
        facts = fx.loop.facts()
        assert facts == attrs.evolve(facts, system_changes=facts.system_changes + 1)
