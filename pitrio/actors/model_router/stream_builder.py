"""Build an assistant message incrementally and emit the stream events of spec §1.7.

:class:`StreamBuilder` is a pure state machine (no trio, no I/O): a provider feeds it what the
model produced (a text block opened, a delta, a tool call's raw JSON, the end of the response)
and gets back the exact :mod:`stream event <pitrio.messages.stream>` to send, whose ``partial``
is an immutable snapshot of the message so far. Every provider (faux, OpenAI, Anthropic, ...)
goes through it, so all of them agree on event order, content indexes and partial snapshots.

Cost: a partial is a :class:`~pitrio.messages.partial.PartialMessage`, a lazy snapshot that
shares the builder's blocks and the pieces of the block being streamed and is materialized only
when something reads its content, so a delta costs O(1) whatever the message's length
(issue 38). Finished blocks are ordinary blocks; the final message is an ordinary message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs
import orjson

from pitrio._direct_init import direct_init
from pitrio.messages.agent import (
    EMPTY_USAGE,
    AssistantMessage,
    Diagnostic,
    StopReason,
    Usage,
    now_ms,
)
from pitrio.messages.codec import loads
from pitrio.messages.content import TextContent, ThinkingContent, ToolCall
from pitrio.messages.delta_run import DeltaRun, StreamItem
from pitrio.messages.model import Model
from pitrio.messages.partial import Layout, PartialMessage, StreamingText, partial_message
from pitrio.messages.stream import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

_text_delta = direct_init(TextDelta)  # one per streamed delta (issue 38)

ABORTED_MESSAGE = "Request was aborted"
"""The ``errorMessage`` pi puts on a response cut short by an abort."""

DoneReason = Literal["stop", "length", "toolUse"]
ErrorReason = Literal["aborted", "error"]
AssistantBlock = TextContent | ThinkingContent | ToolCall
LayoutItem = AssistantBlock | StreamingText


class StreamStateError(RuntimeError):
    """A provider drove the builder out of order (a bug in the provider, not a model failure)."""


@attrs.define
class _OpenBlock:
    """Book-keeping for a block that is still streaming."""

    kind: Literal["text", "thinking", "toolCall"]
    # Text and thinking: the pieces so far, shared with the partial snapshots.
    text: StreamingText | None = None
    # Tool calls: the raw JSON deltas, joined only when they may form a complete object.
    parts: list[str] = attrs.Factory(list)
    # Tool calls only: identity and the arguments shown in partial snapshots.
    id: str = ""
    name: str = ""
    arguments: dict[str, Any] = attrs.Factory(dict)
    thought_signature: str | None = None


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Parse a tool call's accumulated JSON text; ``None`` if it is not (yet) a JSON object.

    A lone surrogate escape (``"\\ud800"``) is kept, as JavaScript's ``JSON.parse`` keeps it: the
    tool that gets such an argument refuses it where it would reach the OS (issue 36)."""
    try:
        value = loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _looks_complete(raw: str) -> bool:
    # An O(1) pre-check so a long streamed argument is not re-parsed on every delta: only text
    # ending in "}" can be a complete JSON object.
    return raw.rstrip().endswith("}")


class StreamBuilder:
    """Incrementally build one assistant message and produce its stream events.

    Call :meth:`start` first, then any sequence of block events (each ``*_start`` returns an
    event whose ``content_index`` names the new block; deltas and ends default to the most
    recently opened block that is still open), and finish with exactly one :meth:`done`,
    :meth:`error` or :meth:`abort`. Partial snapshots say ``stopReason: "pending"`` (pi 1.6.0);
    ``usage`` and ``error_message`` given at construction appear on every partial snapshot
    (pi's faux provider knows them up front); providers that learn usage while streaming call
    :meth:`set_usage`, and the provider's own finish reason goes in with
    :meth:`set_raw_stop_reason`.

    Tool-call snapshots: while the arguments stream, a partial shows the last value at which the
    accumulated JSON text parsed as a complete object, else ``{}`` (what pi shows for its faux
    model); :meth:`toolcall_end` parses the whole text (or takes explicit arguments).
    """

    def __init__(
        self,
        *,
        api: str,
        provider: str,
        model: str,
        usage: Usage = EMPTY_USAGE,
        error_message: str | None = None,
        response_id: str | None = None,
        response_model: str | None = None,
        timestamp: int | None = None,
    ) -> None:
        self._api = api
        self._provider = provider
        self._model = model
        self._usage = usage
        self._error_message = error_message
        self._response_id = response_id
        self._response_model = response_model
        self._raw_stop_reason: str | None = None
        self._timestamp = now_ms() if timestamp is None else timestamp
        # Finished blocks, and a StreamingText for each text/thinking block still streaming.
        self._blocks: list[LayoutItem] = []
        self._layout: Layout | None = None  # of _blocks, made again after each change
        self._header: AssistantMessage | None = None  # the partial's fields, made on change
        self._open: dict[int, _OpenBlock] = {}
        self._last_open: list[int] = []  # open indexes in opening order, for the default target
        self._started = False
        self._result: AssistantMessage | None = None
        self._diagnostics: list[Diagnostic] = []

    @classmethod
    def for_model(cls, model: Model, **kwargs: Any) -> StreamBuilder:
        """A builder whose messages carry ``model``'s api, provider and id."""
        return cls(api=model.api, provider=model.provider, model=model.id, **kwargs)

    # -- state -------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether :meth:`start` was called."""
        return self._started

    @property
    def finished(self) -> bool:
        """Whether the final event (done/error) was produced."""
        return self._result is not None

    @property
    def result(self) -> AssistantMessage | None:
        """The final message once the stream finished, else ``None``."""
        return self._result

    @property
    def open_indexes(self) -> tuple[int, ...]:
        """Content indexes of the blocks that are still streaming, in opening order."""
        return tuple(self._last_open)

    @property
    def partial(self) -> PartialMessage:
        """A snapshot of the message so far (lazy: see :mod:`pitrio.messages.partial`)."""
        layout, header = self._frame()
        streaming = layout.streaming
        if len(streaming) == 1:  # the usual case, made inline: this runs for every delta
            only = streaming[0]
            chars = layout.fixed_chars + only.chars
            return partial_message(header, layout, (len(only.pieces),), chars)
        return partial_message(header, layout, layout.counts(), layout.chars())

    def _frame(self) -> tuple[Layout, AssistantMessage]:
        """The layout and the header the next snapshots share, made now if they changed."""
        layout = self._layout
        if layout is None:
            layout = self._layout = Layout.of(self._blocks)
        header = self._header
        if header is None:
            header = self._snapshot("pending", self._error_message, self._timestamp, ())
            self._header = header
        return layout, header

    @property
    def response_id(self) -> str | None:
        """The provider's response id recorded so far."""
        return self._response_id

    def set_usage(self, usage: Usage) -> None:
        """Replace the usage shown on later snapshots and on the final message."""
        if usage is not self._usage:
            self._usage = usage
            self._header = None

    def set_raw_stop_reason(self, reason: str | None) -> None:
        """Record the provider's own finish reason (``"stop"``, ``"tool_calls"``, ...), shown
        as ``rawStopReason`` on later snapshots and the final message."""
        if reason != self._raw_stop_reason:
            self._raw_stop_reason = reason
            self._header = None

    def set_response_id(self, response_id: str | None, response_model: str | None = None) -> None:
        """Record the provider's response id (and the model that actually answered)."""
        if response_model is None:
            response_model = self._response_model
        # Some providers say it with every chunk: the shared header is made again on a change.
        if response_id != self._response_id or response_model != self._response_model:
            self._response_id = response_id
            self._response_model = response_model
            self._header = None

    def add_diagnostic(self, diagnostic: Diagnostic) -> None:
        """Attach ``diagnostic`` to later snapshots and the final message (pi 1.6.0 notes a
        provider's own recovery there, e.g. an ``anthropic_thread_fallback``)."""
        self._diagnostics.append(diagnostic)
        self._header = None

    # -- events ------------------------------------------------------------------------------

    def start(self) -> StreamStart:
        """Open the stream; the partial is the empty message."""
        if self._started:
            raise StreamStateError("start() called twice")
        self._started = True
        return StreamStart(partial=self.partial)

    def text_start(self) -> TextStart:
        """Open a text block at the next content index."""
        text = StreamingText("text")
        index = self._open_block(_OpenBlock(kind="text", text=text), text)
        return TextStart(content_index=index, partial=self.partial)

    def text_delta(self, delta: str, index: int | None = None) -> TextDelta:
        """Append ``delta`` to an open text block."""
        index, text = self._streaming(index, "text")
        text.append(delta)  # the layout holds this StreamingText already: it stays valid
        return _text_delta(content_index=index, delta=delta, partial=self.partial)

    def text_run(self, deltas: list[str], index: int | None = None) -> list[StreamItem]:
        """:meth:`text_delta` of each of ``deltas`` as one :class:`DeltaRun` item when there
        are two or more (what a consumer expands into the same events); else the plain
        event. Nothing is held back: the run is what was read."""
        if len(deltas) < 2:
            return [self.text_delta(delta, index) for delta in deltas]
        return [self._run("text", deltas, index)]

    def thinking_run(self, deltas: list[str], index: int | None = None) -> list[StreamItem]:
        """:meth:`text_run` for an open thinking block."""
        if len(deltas) < 2:
            return [self.thinking_delta(delta, index) for delta in deltas]
        return [self._run("thinking", deltas, index)]

    def _run(
        self, kind: Literal["text", "thinking"], deltas: list[str], index: int | None
    ) -> DeltaRun:
        index, text = self._streaming(index, kind)
        layout, header = self._frame()
        # Other blocks may be streaming (an OpenAI reply keeps its thinking block open while
        # the text streams): their pieces stay as they are through the run.
        counts = layout.counts()
        slot = next(n for n, item in enumerate(layout.streaming) if item is text)
        before = layout.chars()
        first_count = len(text.pieces) + 1
        added = text.extend(deltas)
        return DeltaRun(
            "text_delta" if kind == "text" else "thinking_delta",
            index,
            tuple(deltas),
            header,
            layout,
            counts,
            slot,
            first_count,
            before + len(deltas[0]),
            before + added,
        )

    def text_end(self, index: int | None = None, *, signature: str | None = None) -> TextEnd:
        """Close a text block; ``signature`` is the provider's opaque text signature."""
        index, streaming = self._streaming(index, "text")
        text = streaming.text()
        self._set_block(index, TextContent(text=text, text_signature=signature))
        self._close(index)
        return TextEnd(content_index=index, content=text, partial=self.partial)

    def thinking_start(self, text: str = "") -> ThinkingStart:
        """Open a thinking block at the next content index, holding ``text`` from the start.

        ``text`` is for blocks that arrive whole (a redacted block's placeholder), not deltas.
        """
        streaming = StreamingText("thinking", text)
        index = self._open_block(_OpenBlock(kind="thinking", text=streaming), streaming)
        return ThinkingStart(content_index=index, partial=self.partial)

    def thinking_delta(self, delta: str, index: int | None = None) -> ThinkingDelta:
        """Append ``delta`` to an open thinking block."""
        index, text = self._streaming(index, "thinking")
        text.append(delta)
        return ThinkingDelta(content_index=index, delta=delta, partial=self.partial)

    def thinking_end(
        self,
        index: int | None = None,
        *,
        signature: str | None = None,
        redacted: bool | None = None,
    ) -> ThinkingEnd:
        """Close a thinking block, with the provider's signature / redaction flag if any."""
        index, streaming = self._streaming(index, "thinking")
        text = streaming.text()
        self._set_block(
            index, ThinkingContent(thinking=text, thinking_signature=signature, redacted=redacted)
        )
        self._close(index)
        return ThinkingEnd(content_index=index, content=text, partial=self.partial)

    def toolcall_start(
        self, id: str, name: str, *, thought_signature: str | None = None
    ) -> ToolCallStart:
        """Open a tool call (its arguments start as ``{}``) at the next content index."""
        block = _OpenBlock(kind="toolCall", id=id, name=name, thought_signature=thought_signature)
        index = self._open_block(block, self._tool_call(block, {}))
        return ToolCallStart(content_index=index, partial=self.partial)

    def toolcall_delta(self, delta: str, index: int | None = None) -> ToolCallDelta:
        """Append raw JSON text to an open tool call's arguments."""
        index, block = self._target(index, "toolCall")
        block.parts.append(delta)
        if _looks_complete(delta):
            parsed = parse_arguments("".join(block.parts))
            if parsed is not None:
                block.arguments = parsed
                self._set_block(index, self._tool_call(block, parsed))
        return ToolCallDelta(content_index=index, delta=delta, partial=self.partial)

    def toolcall_end(
        self, index: int | None = None, *, arguments: dict[str, Any] | None = None
    ) -> ToolCallEnd:
        """Close a tool call; its arguments are ``arguments`` or else the parsed JSON text.

        Unparseable JSON yields ``{}`` (the tool then reports the bad arguments), never an
        exception: a model's malformed output is not a provider failure.
        """
        index, block = self._target(index, "toolCall")
        if arguments is None:
            raw = "".join(block.parts)
            arguments = parse_arguments(raw) if raw.strip() else {}
            if arguments is None:
                arguments = {}
        call = self._tool_call(block, arguments)
        self._set_block(index, call)
        self._close(index)
        return ToolCallEnd(content_index=index, tool_call=call, partial=self.partial)

    def done(self, reason: DoneReason | None = None) -> StreamDone:
        """Finish normally; every block must be closed first.

        ``reason`` defaults to ``toolUse`` if the message has tool calls, else ``stop``.
        """
        self._check_running()
        if self._open:
            raise StreamStateError(f"done() with open blocks at {sorted(self._open)}")
        if reason is None:
            has_calls = any(isinstance(block, ToolCall) for block in self._blocks)
            reason = "toolUse" if has_calls else "stop"
        message = self._snapshot(reason, None, self._timestamp, self._content())
        self._result = message
        return StreamDone(reason=reason, message=message)

    def error(
        self,
        reason: ErrorReason,
        message: str,
        *,
        timestamp: int | None = None,
        diagnostics: tuple[Diagnostic, ...] | None = None,
    ) -> StreamError:
        """Finish in failure; the final message keeps the content streamed so far.

        Open blocks are kept as they are (a stream may break mid-block); ``start`` need not
        have been called (a request can fail before anything streamed). ``diagnostics``
        (status, retry-after, see :mod:`..diagnostics`) go on the final message.
        """
        if self._result is not None:
            raise StreamStateError("the stream already finished")
        stamp = self._timestamp if timestamp is None else timestamp
        final = self._snapshot(reason, message, stamp, self._content())
        if diagnostics:
            final = attrs.evolve(final, diagnostics=(*(final.diagnostics or ()), *diagnostics))
        self._result = final
        return StreamError(reason=reason, error=final)

    def abort(self, message: str = ABORTED_MESSAGE) -> StreamError:
        """Finish as aborted, stamped now (pi stamps the aborted message when it is made)."""
        return self.error("aborted", message, timestamp=now_ms())

    # -- internals ---------------------------------------------------------------------------

    def _content(self) -> tuple[AssistantBlock, ...]:
        """The content now, each streaming block with all its text (for final messages)."""
        return Layout.of(self._blocks).content()

    def _snapshot(
        self,
        stop_reason: StopReason,
        error_message: str | None,
        timestamp: int,
        content: tuple[AssistantBlock, ...],
    ) -> AssistantMessage:
        return AssistantMessage(
            content=content,
            api=self._api,
            provider=self._provider,
            model=self._model,
            response_model=self._response_model,
            response_id=self._response_id,
            raw_stop_reason=self._raw_stop_reason,
            usage=self._usage,
            stop_reason=stop_reason,
            error_message=error_message,
            timestamp=timestamp,
            diagnostics=tuple(self._diagnostics) or None,
        )

    @staticmethod
    def _tool_call(block: _OpenBlock, arguments: dict[str, Any]) -> ToolCall:
        return ToolCall(
            id=block.id,
            name=block.name,
            arguments=arguments,
            thought_signature=block.thought_signature,
        )

    def _check_running(self) -> None:
        if not self._started:
            raise StreamStateError("start() must come first")
        if self._result is not None:
            raise StreamStateError("the stream already finished")

    def _set_block(self, index: int, block: LayoutItem) -> None:
        self._blocks[index] = block
        self._layout = None

    def _open_block(self, block: _OpenBlock, initial: LayoutItem) -> int:
        self._check_running()
        index = len(self._blocks)
        self._blocks.append(initial)
        self._layout = None
        self._open[index] = block
        self._last_open.append(index)
        return index

    def _target(self, index: int | None, kind: str) -> tuple[int, _OpenBlock]:
        self._check_running()
        if index is None:
            if not self._last_open:
                raise StreamStateError(f"no open block for a {kind} event")
            index = self._last_open[-1]
        block = self._open.get(index)
        if block is None:
            raise StreamStateError(f"block {index} is not open")
        if block.kind != kind:
            raise StreamStateError(f"block {index} is a {block.kind} block, not {kind}")
        return index, block

    def _streaming(self, index: int | None, kind: str) -> tuple[int, StreamingText]:
        last_open = self._last_open
        if last_open and self._result is None:
            # The usual delta: to the block opened last (an open block means start() ran).
            last = last_open[-1]
            if index is None or index == last:
                block = self._open[last]
                if block.kind == kind and block.text is not None:
                    return last, block.text
        index, block = self._target(index, kind)
        assert block.text is not None  # text and thinking blocks are opened with their pieces
        return index, block.text

    def _close(self, index: int) -> None:
        del self._open[index]
        self._last_open.remove(index)


def failure_message(
    model: Model,
    message: str,
    *,
    reason: ErrorReason = "error",
    usage: Usage = EMPTY_USAGE,
    timestamp: int | None = None,
) -> AssistantMessage:
    """An empty assistant message for a request that failed before anything streamed."""
    return AssistantMessage(
        content=(),
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=usage,
        stop_reason=reason,
        error_message=message,
        timestamp=now_ms() if timestamp is None else timestamp,
    )


def aborted_message(partial: AssistantMessage, message: str = ABORTED_MESSAGE) -> AssistantMessage:
    """The final message of an aborted stream: the last partial, marked ``aborted``, stamped now.

    For the caller that cancelled a stream (the provider itself just stops at its next
    checkpoint and sends nothing more).
    """
    return attrs.evolve(partial, stop_reason="aborted", error_message=message, timestamp=now_ms())


ENDS_BLOCKS_ON_ABORT = frozenset({"openai-completions"})
"""APIs whose pi provider ends its open blocks when a request is aborted: pi's Chat
Completions provider ends every block when its stream stops, an abort included, before the
aborted message; its Anthropic and Responses providers end none then."""


def abort_block_ends(
    api: str, partial: AssistantMessage, open_indexes: Iterable[int]
) -> tuple[TextEnd | ThinkingEnd | ToolCallEnd, ...]:
    """The end events pi sends for the blocks still open when a response of ``api`` is
    aborted, in content order (none for most APIs). Pure: ``partial`` is the message as the
    abort found it, ``open_indexes`` the blocks started and not yet ended."""
    if api not in ENDS_BLOCKS_ON_ABORT:
        return ()
    out: list[TextEnd | ThinkingEnd | ToolCallEnd] = []
    for index in sorted(open_indexes):
        if not 0 <= index < len(partial.content):
            continue
        block = partial.content[index]
        if isinstance(block, TextContent):
            out.append(TextEnd(content_index=index, content=block.text, partial=partial))
        elif isinstance(block, ThinkingContent):
            out.append(ThinkingEnd(content_index=index, content=block.thinking, partial=partial))
        else:
            out.append(ToolCallEnd(content_index=index, tool_call=block, partial=partial))
    return tuple(out)
