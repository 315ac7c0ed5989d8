"""``get_last_assistant_text`` as pi 1.6.0 picks the reply (``last_assistant_text``)."""

from __future__ import annotations

from pitrio.actors.session.operations import last_assistant_text
from pitrio.messages.agent import AgentMessage, AssistantMessage, StopReason, Usage, user_message
from pitrio.messages.content import TextContent, ThinkingContent, ToolCall


def reply(stop: StopReason, *blocks: str | ToolCall | ThinkingContent) -> AssistantMessage:
    content = tuple(TextContent(text=b) if isinstance(b, str) else b for b in blocks)
    return AssistantMessage(
        content=content,
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason=stop,
        timestamp=1,
    )


CALL = ToolCall(id="c1", name="read", arguments={"path": "a"})


def test_the_last_reply_that_ended_normally_or_has_text() -> None:
    answered = reply("stop", "the ", "answer ")
    cases: list[tuple[tuple[AgentMessage, ...], str | None]] = [
        ((), None),
        ((user_message("q"),), None),
        ((answered,), "the answer"),
        # Skipped: aborted, failed or tool-only replies without text (pi 1.6.0, #12119).
        ((answered, reply("aborted")), "the answer"),
        ((answered, reply("error", "   ")), "the answer"),
        ((answered, reply("toolUse", CALL)), "the answer"),
        ((answered, reply("toolUse", ThinkingContent(thinking="hm"), CALL)), "the answer"),
        # Kept: one with text whatever its end, and one that ended normally without text.
        ((answered, reply("aborted", "partial")), "partial"),
        ((answered, reply("toolUse", "let me look", CALL)), "let me look"),
        ((answered, reply("stop")), None),
    ]
    for messages, expected in cases:
        assert last_assistant_text(messages) == expected, messages
