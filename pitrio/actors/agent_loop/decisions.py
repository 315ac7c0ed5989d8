"""Pure decisions of the core loop: what ``prompt``/``continue`` may do, and messages it builds."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pitrio.actors.agent_loop.queues import MessageQueue
from pitrio.errors import AgentBusyError, ContinueError
from pitrio.messages.agent import (
    EMPTY_USAGE,
    AgentMessage,
    AssistantMessage,
    StopReason,
    now_ms,
)
from pitrio.messages.codec import Extra
from pitrio.messages.content import TextContent
from pitrio.messages.model import Model

PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or followUp() to queue messages, "
    "or wait for completion."
)
CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
NO_MESSAGES = "No messages to continue from"
NO_CONTEXT = "Cannot continue: no messages in context"
ABORTED_TEXT = "Request was aborted"
ABORTED_BEFORE_RESPONSE_TEXT = "Request was aborted."
MISTRAL_ABORTED_BEFORE_RESPONSE_TEXT = "Request aborted by client"
BEDROCK_ABORTED_BEFORE_RESPONSE_TEXT = "Request aborted"
"""The AWS SDK's abort error (its HTTP handler's), which pi 0.73.1 reports unchanged when an
abort lands before Bedrock's response has begun; once it streams, pi's own text (measured
against pi with the SDK's default HTTP/2 handler)."""
# The APIs whose vendor SDK pi 0.73.1 calls through (OpenAI's and Anthropic's): their abort
# error, raised while no response has begun, carries the full stop.
SDK_APIS = frozenset(
    {"openai-completions", "openai-responses", "azure-openai-responses", "anthropic-messages"}
)


def aborted_text(api: str, *, responded: bool) -> str:
    """The ``errorMessage`` of a response cut short by an abort, as pi words it: the vendor
    SDK's sentence when the abort came before the response began, pi's own (no full stop)
    once it streams, and always for the faux provider."""
    if not responded and api in SDK_APIS:
        return ABORTED_BEFORE_RESPONSE_TEXT
    if not responded and api == "mistral-conversations":
        return MISTRAL_ABORTED_BEFORE_RESPONSE_TEXT  # the Mistral SDK's RequestAbortedError
    if not responded and api == "bedrock-converse-stream":
        return BEDROCK_ABORTED_BEFORE_RESPONSE_TEXT
    return ABORTED_TEXT


def continue_from_role(role: str) -> str:
    """The error text for continuing from a message of ``role``."""
    return f"Cannot continue from message role: {role}"


@attrs.frozen
class RunPrompts:
    """Run the loop with these prompt messages (``skip_initial_steering``: do not poll first)."""

    prompts: tuple[AgentMessage, ...]
    skip_initial_steering: bool = False


@attrs.frozen
class RunContinuation:
    """Run the loop in continuation mode: no new prompt, answer the existing context."""


ContinuePlan = RunPrompts | RunContinuation


def check_prompt(running: bool) -> None:
    """Refuse a prompt while a run is active."""
    if running:
        raise AgentBusyError(PROMPT_BUSY)


def plan_continue(
    messages: Sequence[AgentMessage],
    *,
    running: bool,
    steering: MessageQueue,
    follow_up: MessageQueue,
) -> ContinuePlan:
    """Decide what ``continue()`` does (spec §2.5), draining a queue only when it is used."""
    if running:
        raise AgentBusyError(CONTINUE_BUSY)
    if not messages:
        raise ContinueError(NO_MESSAGES)
    if isinstance(messages[-1], AssistantMessage):
        queued = steering.drain()
        if queued:
            return RunPrompts(tuple(queued), skip_initial_steering=True)
        queued = follow_up.drain()
        if queued:
            return RunPrompts(tuple(queued))
        raise ContinueError(continue_from_role("assistant"))
    return RunContinuation()


def failure_message(model: Model | None, error: str, *, aborted: bool) -> AssistantMessage:
    """The assistant message synthesized when a run fails outside the provider (§2.6 step 4)."""
    return AssistantMessage(
        content=(TextContent(text=""),),
        api=model.api if model else "unknown",
        provider=model.provider if model else "unknown",
        model=model.id if model else "unknown",
        usage=EMPTY_USAGE,
        stop_reason="aborted" if aborted else "error",
        error_message=error,
        timestamp=now_ms(),
    )


def empty_response(model: Model | None) -> AssistantMessage:
    """An empty assistant message for a response that never started."""
    return AssistantMessage(
        content=(),
        api=model.api if model else "unknown",
        provider=model.provider if model else "unknown",
        model=model.id if model else "unknown",
        usage=EMPTY_USAGE,
        stop_reason="stop",
        timestamp=now_ms(),
    )


SETUP_ABORTED_TEXT = "This operation was aborted"
"""pi 1.6.0's text for a request whose abort came before it was sent: the abort error of the
request's setup (auth, the provider's module), which its lazy stream reports."""
SETUP_FAILURE_ORDER = (
    "role",
    "content",
    "api",
    "provider",
    "model",
    "usage",
    "stopReason",
    "errorMessage",
    "timestamp",
)
"""The keys of pi 1.6.0's setup-failure message, as it builds it (the error before the time,
where a provider's own failures add the error to a message already made)."""


def aborted_before_request(model: Model | None) -> AssistantMessage:
    """The response of a request aborted before it was sent, as pi 1.6.0's lazy stream makes
    it: no content, :data:`SETUP_ABORTED_TEXT`, its keys in :data:`SETUP_FAILURE_ORDER`."""
    empty = empty_response(model)
    return attrs.evolve(
        empty,
        stop_reason="aborted",
        error_message=SETUP_ABORTED_TEXT,
        extra=Extra({}, order=SETUP_FAILURE_ORDER),
    )


def end_response(partial: AssistantMessage, reason: StopReason, error: str) -> AssistantMessage:
    """Close a response that did not end by itself (abort, or a stream that just stopped)."""
    return attrs.evolve(partial, stop_reason=reason, error_message=error)
