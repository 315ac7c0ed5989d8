"""A scripted, in-process model provider (the counterpart of pi-ai's faux provider).

:class:`FauxProvider` answers each request with the next scripted :class:`FauxReply` from its
queue (or a script computing one from the request), streamed through the
:class:`~pitrio.actors.model_router.stream_builder.StreamBuilder` in chunks of
``chunk_size`` characters (12 by default, as in the fixtures), with an optional delay per chunk.
With an empty queue and no default script it echoes the text of the last user message: that is
the built-in model ``faux/echo``, usable offline.

Usage figures are explicit on a reply or estimated the way the fixtures were recorded: tokens
are ``ceil(characters / 4)`` of a text serialisation of the request (system prompt, messages,
tool schemas) and of the reply, and a prompt cache per session id is simulated (``cacheRead`` =
the prefix shared with that session's previous request, ``cacheWrite`` = the rest).

Every request is recorded (:attr:`FauxProvider.requests`) so tests can assert what the model
was sent. The pure helpers below (serialisation, chunking, estimates) carry the logic; the
provider's :meth:`~FauxProvider.stream` is the thin trio shell that paces and sends.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import trio

from pitrio.actors.model_router.providers.base import EventSender, cache_session_id
from pitrio.actors.model_router.stream_builder import (
    ABORTED_MESSAGE,
    StreamBuilder,
    failure_message,
)
from pitrio.actors.model_router.usage import estimate_tokens, make_usage
from pitrio.messages.agent import (
    FinalStopReason,
    LlmMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.codec import dumps
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall, text_of
from pitrio.messages.model import LlmContext, Model, StreamOptions, ToolSpec
from pitrio.messages.stream import StreamError

DEFAULT_CHUNK_SIZE = 12
"""Characters per streamed delta (pi's faux at three 4-character tokens per chunk)."""

REQUESTS_KEPT = 1000
"""How many recent requests :attr:`FauxProvider.requests` keeps at least (at most twice as
many)."""

CACHED_SESSIONS = 256
"""How many sessions' last prompts the prompt-cache simulation keeps (the least recently
used forgotten first; a forgotten session's next request writes its whole prompt again, as a
vendor's expired cache would)."""

SCRIPTED_ERROR = "Scripted faux error"
"""The error message of a reply whose stop reason is ``error`` but which names no message."""


@attrs.frozen
class FauxToolCall:
    """A scripted tool call; ``id`` defaults to ``call_<n>``, numbered per provider."""

    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    id: str | None = None


def _tool_calls(calls: Iterable[FauxToolCall]) -> tuple[FauxToolCall, ...]:
    return tuple(calls)


def _check_stop_reason(reply: FauxReply, _attribute: Any, value: FinalStopReason | None) -> None:
    if reply.error is not None and value not in (None, "error", "aborted"):
        raise ValueError(f"a reply with an error cannot stop with {value!r}")


@attrs.frozen(kw_only=True)
class FauxReply:
    """One scripted response.

    Blocks stream in this order: ``thinking``, ``text``, then each of ``tool_calls``. ``error``
    makes the response fail (after streaming whatever blocks it has) with that message and stop
    reason ``error``, or ``aborted`` if ``stop_reason`` says so. Without an error the stop
    reason defaults to ``toolUse`` when there are tool calls, else ``stop`` (``length`` may be
    given). ``usage`` overrides the estimate. ``chunk_delay`` (seconds before each chunk) and
    ``chunk_size`` override the provider's defaults for this reply.
    """

    text: str | None = None
    thinking: str | None = None
    tool_calls: tuple[FauxToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    error: str | None = None
    stop_reason: FinalStopReason | None = attrs.field(default=None, validator=_check_stop_reason)
    usage: Usage | None = None
    chunk_delay: float | None = None
    chunk_size: int | None = attrs.field(default=None)

    @chunk_size.validator
    def _check_chunk_size(self, _attribute: Any, value: int | None) -> None:
        if value is not None and value < 1:
            raise ValueError("chunk_size must be at least 1")

    @property
    def final_stop_reason(self) -> FinalStopReason:
        """The stop reason the response ends with."""
        if self.stop_reason is not None:
            return self.stop_reason
        if self.error is not None:
            return "error"
        return "toolUse" if self.tool_calls else "stop"

    @property
    def error_message(self) -> str | None:
        """The ``errorMessage`` of the final message (``None`` unless it fails)."""
        reason = self.final_stop_reason
        if reason == "aborted":
            return self.error if self.error is not None else ABORTED_MESSAGE
        if reason == "error":
            return self.error if self.error is not None else SCRIPTED_ERROR
        return None


FauxScript = Callable[[LlmContext], FauxReply | str]
"""A dynamic reply: computes the reply (or just its text) from the request's context."""

FauxStep = FauxReply | str | FauxScript
"""What a queue holds: a reply, a plain text reply, or a script."""


@attrs.frozen(kw_only=True)
class FauxRequest:
    """One request the provider received, exactly as it was passed in."""

    model: Model
    context: LlmContext
    options: StreamOptions


# -- pure helpers ----------------------------------------------------------------------------


def _json(value: Any) -> str:
    # Compact, like JavaScript's JSON.stringify, so character counts match pi's; a lone
    # surrogate (a scripted tool argument may hold one) escaped, as JSON.stringify writes it.
    return dumps(value).decode()


def _user_content_text(content: str | tuple[TextContent | ImageContent, ...]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        block.text
        if isinstance(block, TextContent)
        else f"[image:{block.mime_type}:{len(block.data)}]"
        for block in content
    )


def reply_text(blocks: Iterable[TextContent | ThinkingContent | ToolCall]) -> str:
    """The text a response is measured by: its blocks, tool calls as ``name:{json}``, by line."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
        else:
            parts.append(f"{block.name}:{_json(block.arguments)}")
    return "\n".join(parts)


def _message_text(message: LlmMessage) -> str:
    if isinstance(message, UserMessage):
        return _user_content_text(message.content)
    if isinstance(message, ToolResultMessage):
        return "\n".join([message.tool_name, *(_user_content_text((b,)) for b in message.content)])
    return reply_text(message.content)


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def serialize_request(context: LlmContext) -> str:
    """The text a request is measured by: system prompt, one part per message, tool schemas."""
    parts: list[str] = []
    if context.system_prompt:
        parts.append(f"system:{context.system_prompt}")
    parts.extend(f"{message.role}:{_message_text(message)}" for message in context.messages)
    if context.tools:
        parts.append("tools:" + _json([_tool_json(tool) for tool in context.tools]))
    return "\n\n".join(parts)


def common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``.

    Binary search over slice comparisons: O(n log n) character compares done in C rather than
    a Python loop over a long prompt.
    """
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def estimate_usage(
    prompt: str, output_text: str, previous_prompt: str | None, *, cached: bool
) -> Usage:
    """Usage estimate of one response.

    ``cached`` turns the prompt-cache simulation on (the request had a session id); the first
    request of a session writes the whole prompt to the cache.
    """
    prompt_tokens = estimate_tokens(prompt)
    output = estimate_tokens(output_text)
    if not cached:
        return make_usage(input=prompt_tokens, output=output)
    if previous_prompt is None:
        return make_usage(input=prompt_tokens, output=output, cache_write=prompt_tokens)
    shared = common_prefix_length(previous_prompt, prompt)
    cache_read = estimate_tokens(previous_prompt[:shared])
    cache_write = estimate_tokens(prompt[shared:])
    return make_usage(
        input=max(0, prompt_tokens - cache_read),
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
    )


def split_chunks(text: str, size: int = DEFAULT_CHUNK_SIZE) -> list[str]:
    """``text`` in pieces of ``size`` characters (the last may be shorter); ``[""]`` if empty."""
    if not text:
        return [""]
    return [text[i : i + size] for i in range(0, len(text), size)]


def last_user_text(context: LlmContext) -> str:
    """Text of the last user-role message of ``context`` (``""`` if there is none)."""
    for message in reversed(context.messages):
        if isinstance(message, UserMessage):
            return text_of(message.content)
    return ""


# -- the provider ----------------------------------------------------------------------------


class FauxProvider:
    """A scripted model: a queue of replies, streamed with pi's event protocol.

    ``default`` answers when the queue is empty (else the last user message is echoed).
    ``chunk_delay`` is the pause before each chunk in seconds; ``tokens_per_second`` instead
    paces each chunk by its estimated tokens (pi's pacing; 200 gives 15 ms per 12 characters).
    ``simulate_cache`` turns the per-session prompt-cache estimate on; it remembers the last
    prompt of the ``cached_sessions`` most recently used sessions only, so a daemon holding
    thousands of idle sessions does not keep a copy of each one's context here.
    """

    def __init__(
        self,
        replies: Iterable[FauxStep] = (),
        *,
        default: FauxScript | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunk_delay: float = 0.0,
        tokens_per_second: float | None = None,
        simulate_cache: bool = True,
        cached_sessions: int = CACHED_SESSIONS,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if cached_sessions < 1:
            raise ValueError("cached_sessions must be at least 1")
        self._queue: collections.deque[FauxStep] = collections.deque(replies)
        self.default = default
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.tokens_per_second = tokens_per_second
        self.simulate_cache = simulate_cache
        # The most recent requests only: a daemon serving faux models for days must not keep
        # every context it was sent (the soak found this growing ~3.5 MB a minute).
        self.requests: list[FauxRequest] = []
        # Insertion order is recency: a session's entry is put back at the end on each use.
        self._prompt_cache: dict[str, str] = {}
        self._cached_sessions = cached_sessions
        self._call_counter = 0

    # -- scripting ---------------------------------------------------------------------------

    def push(self, *steps: FauxStep) -> None:
        """Append replies to the queue."""
        self._queue.extend(steps)

    def set_replies(self, steps: Iterable[FauxStep]) -> None:
        """Replace the queue."""
        self._queue = collections.deque(steps)

    @property
    def pending(self) -> int:
        """How many queued replies are left."""
        return len(self._queue)

    @property
    def last_request(self) -> FauxRequest:
        """The most recent request (raises ``IndexError`` if none arrived)."""
        return self.requests[-1]

    def next_tool_call_id(self) -> str:
        """A fresh ``call_<n>`` id (numbered per provider, like the recorded fixtures)."""
        self._call_counter += 1
        return f"call_{self._call_counter}"

    # -- the stream --------------------------------------------------------------------------

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions, send: EventSender
    ) -> None:
        """Stream the next scripted reply on ``send`` (a :data:`StreamFn`)."""
        self.requests.append(FauxRequest(model=model, context=context, options=options))
        if len(self.requests) > 2 * REQUESTS_KEPT:  # trimmed in bulk: O(1) per request
            del self.requests[:-REQUESTS_KEPT]
        await trio.lowlevel.checkpoint()
        try:
            reply = self._next_reply(context)
        except Exception as exc:
            # A failing script is a model failure as far as the stream contract goes.
            await send.send(StreamError(reason="error", error=failure_message(model, str(exc))))
            return
        blocks = self._blocks(reply)
        usage = self._usage(model, context, options, reply, blocks)
        stop_reason = reply.final_stop_reason
        error_message = reply.error_message
        builder = StreamBuilder.for_model(model, usage=usage, error_message=error_message)
        size = reply.chunk_size or self.chunk_size
        await send.send(builder.start())
        for block in blocks:
            if isinstance(block, ThinkingContent):
                await send.send(builder.thinking_start())
                for chunk in split_chunks(block.thinking, size):
                    await self._pace(chunk, reply)
                    await send.send(builder.thinking_delta(chunk))
                await send.send(builder.thinking_end())
            elif isinstance(block, TextContent):
                await send.send(builder.text_start())
                for chunk in split_chunks(block.text, size):
                    await self._pace(chunk, reply)
                    await send.send(builder.text_delta(chunk))
                await send.send(builder.text_end())
            else:
                await send.send(builder.toolcall_start(block.id, block.name))
                for chunk in split_chunks(_json(block.arguments), size):
                    await self._pace(chunk, reply)
                    await send.send(builder.toolcall_delta(chunk))
                await send.send(builder.toolcall_end(arguments=block.arguments))
        if stop_reason == "error" or stop_reason == "aborted":
            assert error_message is not None
            await send.send(builder.error(stop_reason, error_message))
        else:
            await send.send(builder.done(stop_reason))

    # -- internals ---------------------------------------------------------------------------

    def _next_reply(self, context: LlmContext) -> FauxReply:
        step: FauxStep
        if self._queue:
            step = self._queue.popleft()
        elif self.default is not None:
            step = self.default
        else:
            step = FauxReply(text=last_user_text(context))
        reply = step if isinstance(step, FauxReply | str) else step(context)
        return FauxReply(text=reply) if isinstance(reply, str) else reply

    def _blocks(self, reply: FauxReply) -> list[TextContent | ThinkingContent | ToolCall]:
        blocks: list[TextContent | ThinkingContent | ToolCall] = []
        if reply.thinking is not None:
            blocks.append(ThinkingContent(thinking=reply.thinking))
        if reply.text is not None:
            blocks.append(TextContent(text=reply.text))
        for call in reply.tool_calls:
            call_id = call.id if call.id is not None else self.next_tool_call_id()
            blocks.append(ToolCall(id=call_id, name=call.name, arguments=call.arguments))
        return blocks

    def _usage(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        reply: FauxReply,
        blocks: list[TextContent | ThinkingContent | ToolCall],
    ) -> Usage:
        session_id = cache_session_id(options) if self.simulate_cache else None
        if reply.usage is not None and session_id is None:
            return reply.usage  # nothing to estimate, no cache to keep up to date
        prompt = serialize_request(context)
        previous = self._prompt_cache.pop(session_id, None) if session_id else None
        if session_id:
            self._prompt_cache[session_id] = prompt
            while len(self._prompt_cache) > self._cached_sessions:
                del self._prompt_cache[next(iter(self._prompt_cache))]
        if reply.usage is not None:
            return reply.usage
        usage = estimate_usage(prompt, reply_text(blocks), previous, cached=bool(session_id))
        return make_usage(
            input=usage.input,
            output=usage.output,
            cache_read=usage.cache_read,
            cache_write=usage.cache_write,
            model=model,
            mark_computed=False,  # pi's faux usage has no totalFromProvider
        )

    async def _pace(self, chunk: str, reply: FauxReply) -> None:
        # Every chunk passes a checkpoint, so an abort (cancellation) stops the stream between
        # any two deltas even when no delay is configured.
        if reply.chunk_delay is not None:
            delay = reply.chunk_delay
        elif self.tokens_per_second:
            delay = estimate_tokens(chunk) / self.tokens_per_second
        else:
            delay = self.chunk_delay
        if delay > 0:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "FauxProvider",
    "FauxReply",
    "FauxRequest",
    "FauxScript",
    "FauxStep",
    "FauxToolCall",
    "common_prefix_length",
    "estimate_usage",
    "last_user_text",
    "reply_text",
    "serialize_request",
    "split_chunks",
]
