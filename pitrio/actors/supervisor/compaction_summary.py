"""Compaction policy, what to ask (spec §3.8.6): the conversation serialised for the
summarizer, the summary requests of a plan (history, a split turn's prefix) and the final
:class:`~pitrio.messages.entries.CompactionResult`. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from pitrio.actors.supervisor import prompts
from pitrio.actors.supervisor._text import (
    js_length,
    js_slice,
    js_stringify,
)
from pitrio.actors.supervisor.compaction_cut import (
    CompactionPreparation,
)
from pitrio.actors.supervisor.compaction_measure import (
    ADDITIONAL_FOCUS,
    NO_PRIOR_HISTORY,
    TOOL_RESULT_MAX_CHARS,
    TURN_CONTEXT_SEPARATOR,
    UNKNOWN_ERROR,
)
from pitrio.actors.supervisor.file_ops import format_file_lists
from pitrio.actors.supervisor.retry import is_retryable_error
from pitrio.errors import SummarizationError
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    LlmMessage,
    ThinkingLevel,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.content import TextContent, ThinkingContent, ToolCall
from pitrio.messages.convert import convert_to_llm
from pitrio.messages.entries import (
    CompactionResult,
)
from pitrio.messages.model import LlmContext, Model, StreamOptions

# --- serialisation and summary requests (§3.8.6) ---------------------------------------------


def _tool_call_text(call: ToolCall) -> str:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    rendered = ", ".join(f"{key}={js_stringify(value)}" for key, value in arguments.items())
    return f"{call.name}({rendered})"


def _truncate_tool_result(text: str) -> str:
    length = js_length(text)
    if length <= TOOL_RESULT_MAX_CHARS:
        return text
    dropped = length - TOOL_RESULT_MAX_CHARS
    return js_slice(text, TOOL_RESULT_MAX_CHARS) + f"\n\n[... {dropped} more characters truncated]"


def _joined_text(content: str | Sequence[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def serialize_conversation(messages: Sequence[LlmMessage]) -> str:
    """The text the summarizer reads: one labelled part per message piece, blank-line separated.

    ``[User]: ...``; an assistant gives ``[Assistant thinking]: ...``, ``[Assistant]: ...``
    and ``[Assistant tool calls]: name(key=<json>, ...); ...`` (each only when present);
    ``[Tool result]: ...`` is cut to 2000 characters. Same labels as pi, so the fixtures'
    scripted summarizer counts the same lines.
    """
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = _joined_text(message.content)
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
            calls = [_tool_call_text(b) for b in message.content if isinstance(b, ToolCall)]
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif isinstance(message, ToolResultMessage):
            text = _joined_text(message.content)
            if text:
                parts.append(f"[Tool result]: {_truncate_tool_result(text)}")
    return "\n\n".join(parts)


def serialize_messages(messages: Sequence[AgentMessage]) -> str:
    """:func:`serialize_conversation` of agent messages, converted as the model sees them."""
    return serialize_conversation(convert_to_llm(messages))


def conversation_block(messages: Sequence[AgentMessage]) -> str:
    """``messages`` serialized and wrapped in ``<conversation>`` tags, ready for a prompt."""
    return f"<conversation>\n{serialize_messages(messages)}\n</conversation>\n\n"


SummaryKind = Literal["initial", "update", "turn_prefix", "branch"]


@attrs.frozen(kw_only=True)
class SummaryRequest:
    """One summary model call: the system prompt, the single user prompt, the output limit."""

    kind: SummaryKind
    system_prompt: str
    prompt: str
    max_tokens: int | None = None
    """``None``: the provider's default for the model, as pi 1.6.0 sends every summary call,
    branch summaries included (0.73.1 capped them at a share of the reserve, 2048 for a
    branch)."""

    def context(self, timestamp: int) -> LlmContext:
        """The provider context: the prompt as one user message, no tools."""
        user = UserMessage(content=(TextContent(text=self.prompt),), timestamp=timestamp)
        return LlmContext(system_prompt=self.system_prompt, messages=(user,))

    def stream_options(
        self,
        model: Model,
        thinking_level: ThinkingLevel | None,
        api_key: str | None = None,
        *,
        session_id: str | None = None,
    ) -> StreamOptions:
        """Options for the call: the output limit, reasoning at the session's level when the
        model reasons and thinking is on (every summary kind, as pi 1.6.0), and no prompt
        caching: pi 1.6.0 sends its one-off summary calls with cache retention ``none``, under
        a routing id of their own (``session_id``; Azure still sends it as the cache key)."""
        reasoning: ThinkingLevel | None = None
        if model.reasoning and thinking_level is not None and thinking_level != "off":
            reasoning = thinking_level
        return StreamOptions(
            reasoning=reasoning,
            max_tokens=self.max_tokens,
            api_key=api_key,
            session_id=session_id,
            cache_retention="none",
        )


def _with_focus(instructions: str, custom_instructions: str | None) -> str:
    if custom_instructions:
        return instructions + ADDITIONAL_FOCUS + custom_instructions
    return instructions


def build_summary_request(
    preparation: CompactionPreparation, custom_instructions: str | None = None
) -> SummaryRequest:
    """The history summary request: the initial one, or the update one after a compaction.

    The prompt holds the conversation to summarize, then the earlier summary in
    ``<previous-summary>`` tags when there is one, then the instructions (plus the user's
    ``Additional focus``). The output limit is the model's default (pi 1.6.0).
    """
    prompt = conversation_block(preparation.messages_to_summarize)
    if preparation.previous_summary is not None:
        prompt += f"<previous-summary>\n{preparation.previous_summary}\n</previous-summary>\n\n"
        instructions = prompts.UPDATE_INSTRUCTIONS
        kind: SummaryKind = "update"
    else:
        instructions = prompts.INITIAL_INSTRUCTIONS
        kind = "initial"
    prompt += _with_focus(instructions, custom_instructions)
    return SummaryRequest(
        kind=kind,
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=prompt,
    )


def build_turn_prefix_request(preparation: CompactionPreparation) -> SummaryRequest:
    """The request summarizing the beginning of a split turn (the model's default output)."""
    prompt = conversation_block(preparation.turn_prefix_messages)
    prompt += prompts.TURN_PREFIX_INSTRUCTIONS
    return SummaryRequest(
        kind="turn_prefix",
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=prompt,
    )


@attrs.frozen(kw_only=True)
class SummaryPlan:
    """The model calls one compaction makes (a split turn's two: the history's first)."""

    history: SummaryRequest | None
    """The history request; ``None`` means the history part is the text "No prior history."."""
    turn_prefix: SummaryRequest | None
    """The split turn's prefix request, if the cut splits a turn with something before it."""


def plan_summary(
    preparation: CompactionPreparation, custom_instructions: str | None = None
) -> SummaryPlan:
    """Which summary calls to make for ``preparation`` (spec §3.8.6).

    Without a split turn the history request is always made, even for empty history. With a
    split turn the prefix gets its own request, and an empty history is not asked about (the
    history part becomes "No prior history.", as in pi - an earlier summary is then not
    carried into the new one).
    """
    if preparation.is_split_turn and preparation.turn_prefix_messages:
        history = (
            build_summary_request(preparation, custom_instructions)
            if preparation.messages_to_summarize
            else None
        )
        return SummaryPlan(history=history, turn_prefix=build_turn_prefix_request(preparation))
    return SummaryPlan(
        history=build_summary_request(preparation, custom_instructions), turn_prefix=None
    )


def response_text(message: AssistantMessage, *, failure: str = "Summarization failed") -> str:
    """The text blocks of a summary response joined by newlines.

    A failed response raises :class:`~pitrio.errors.SummarizationError` with
    ``"<failure>: <error text>"`` (``retryable`` if the error is transient).
    """
    if message.stop_reason == "error":
        error = message.error_message or UNKNOWN_ERROR
        raise SummarizationError(f"{failure}: {error}", retryable=is_retryable_error(message))
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


TURN_PREFIX_FAILURE = "Turn prefix summarization failed"


def finish_compaction(
    preparation: CompactionPreparation,
    plan: SummaryPlan,
    history_text: str | None,
    turn_prefix_text: str | None = None,
    *,
    usage: Usage | None = None,
) -> CompactionResult:
    """Assemble the :class:`CompactionResult` from the summary texts the plan's calls gave.

    A split turn's parts are joined under a "Turn Context (split turn)" rule; the file lists
    are appended last and stored in ``details``. ``usage`` is what the calls cost together
    (:func:`combine_usage`); ``estimated_tokens_after`` is left for the caller, who knows the
    context once the entry is appended.
    """
    history = history_text if plan.history is not None and history_text is not None else None
    summary = history if history is not None else NO_PRIOR_HISTORY
    if plan.turn_prefix is not None:
        summary += TURN_CONTEXT_SEPARATOR + (turn_prefix_text or "")
    read_files, modified_files = preparation.file_ops.file_lists()
    summary += format_file_lists(read_files, modified_files)
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        usage=usage,
        details=preparation.file_ops.details(),
    )


def compaction_failure_message(reason: str, error: str) -> str:
    """The ``compaction_end.errorMessage`` of a compaction that raised ``error``."""
    if reason == "overflow":
        return f"Context overflow recovery failed: {error}"
    if reason == "manual":
        return f"Compaction failed: {error}"
    return f"Auto-compaction failed: {error}"
