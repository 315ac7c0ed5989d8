"""The ``anthropic-messages`` answer: Messages API stream events in, assistant stream events out.

Sans-IO: :class:`AnthropicParser` takes the named SSE events one by one (``message_start``,
``content_block_start`` / ``content_block_delta`` / ``content_block_stop``, ``message_delta``,
``message_stop``, ``ping``, ``error``) and returns the stream events they make. Kept apart from
the request side (``anthropic.py``) so each module reads in one sitting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from pitrio.actors.model_router.providers.http import (
    MalformedStreamError,
    SseParser,
    stream_error_message,
)
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.delta_run import StreamItem
from pitrio.messages.model import Model
from pitrio.messages.stream import AssistantMessageEvent, StreamDone

API = "anthropic-messages"
REDACTED_THINKING_TEXT = "[Reasoning redacted]"
"""The text a ``redacted_thinking`` block shows in place of its reasoning."""


class AnthropicParser(SseParser):
    """Messages API stream events in, assistant stream events out (sans-IO)."""

    api_label = API

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._blocks: dict[int, int] = {}  # the vendor's block index -> content index
        self._kinds: dict[int, str] = {}  # content index -> kind
        self._signatures: dict[int, str] = {}
        self._redacted: set[int] = set()
        self._inputs: dict[int, dict[str, Any]] = {}  # tool input given whole at block start
        self._stop_reason: str | None = None
        self._usage: dict[str, int] = {}
        self.tool_names: Mapping[str, str] | None = None
        """Set from :attr:`AnthropicRequest.tool_names`: a tool call's name is looked up
        lower-cased (an unknown one is kept)."""
        self.served_model: str | None = None
        """The model ``message_start`` names (another than the request's: a fallback)."""
        self.on_done: Callable[[AssistantMessage, str | None], None] | None = None
        """Told the final message and :attr:`served_model` of a clean reply before its
        ``done`` event goes out (a caller may stop reading at that event)."""

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event (its JSON ``type`` names it; the SSE name is a fallback)."""
        return self._on_payload(self.json(data, event), event)

    def feed_all(
        self, decoded: list[tuple[str, str]]
    ) -> tuple[list[StreamItem], list[AssistantMessageEvent], int]:
        """As :meth:`SseParser.feed_all`; consecutive ``text_delta`` events of one text block
        go to the builder as one run, which comes out as one :class:`DeltaRun` item (issue
        38). Expanded, the events are those of one feed per event."""
        if self.final is not None:
            return super().feed_all(decoded)
        read: list[StreamItem] = []
        texts: list[str] = []
        block = -1  # the content index of the text block ``texts`` go to
        for position, (event, data) in enumerate(decoded):
            payload: Any = None
            if event == "content_block_delta" and self.builder.started:
                try:
                    payload = orjson.loads(data)
                except orjson.JSONDecodeError:
                    payload = None  # fed below, which says what is wrong with it
                text, index = self._text_delta(payload)
                if text is not None:
                    if index != block and texts:
                        read += self.builder.text_run(texts, block)
                        texts = []
                    texts.append(text)
                    block = index
                    continue
            if texts:
                read += self.builder.text_run(texts, block)
                texts = []
            events = (
                self.feed(event, data)
                if payload is None
                else self._checked(self._on_payload, payload, "content_block_delta")
            )
            if self.final is not None:
                return read, events, position + 1
            read += events
        if texts:
            read += self.builder.text_run(texts, block)
        return read, [], len(decoded)

    def _text_delta(self, payload: Any) -> tuple[str | None, int]:
        """The text and content index of a ``text_delta`` to an open text block, else
        ``(None, -1)`` (the event is fed as any other)."""
        if type(payload) is not dict or payload.get("type") != "content_block_delta":
            return None, -1
        delta = payload.get("delta")
        vendor = payload.get("index")
        if type(delta) is not dict or delta.get("type") != "text_delta" or type(vendor) is not int:
            return None, -1
        text = delta.get("text")
        index = self._blocks.get(vendor)
        if type(text) is not str or index is None or self._kinds.get(index) != "text":
            return None, -1
        return text, index

    def _on_payload(self, payload: Any, event: str) -> list[AssistantMessageEvent]:
        if not isinstance(payload, dict):
            raise MalformedStreamError(f"expected a JSON object in a {event!r} event")
        kind = payload.get("type", event)
        out: list[AssistantMessageEvent] = []
        if kind == "error":
            message, code = stream_error_message(payload, "anthropic")
            return [self.fail(message, name="StreamError", code=code)]
        if kind == "ping":
            return out
        self.ensure_started(out)
        if kind == "message_start":
            started = payload.get("message")
            if isinstance(started, dict):
                served = started.get("model")
                self.served_model = served if isinstance(served, str) else None
                # pi 1.6.0 names the answering model only when it is not the one asked for.
                other = self.served_model if self.served_model != self.model.id else None
                self.builder.set_response_id(started.get("id"), other)
                self._take_usage(started.get("usage"))
        elif kind == "content_block_start":
            self._block_start(payload, out)
        elif kind == "content_block_delta":
            self._block_delta(payload, out)
        elif kind == "content_block_stop":
            index = self._blocks.pop(_index(payload), None)
            if index is not None and index in self.builder.open_indexes:
                out.append(self.close_block(index))
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
                self.builder.set_raw_stop_reason(self._stop_reason)
            self._take_usage(payload.get("usage"))
        elif kind == "message_stop":
            out.extend(self._complete())
        return out

    def on_end(self) -> list[AssistantMessageEvent]:
        """The body ended without ``message_stop``: the response was cut short."""
        raise MalformedStreamError("ended without message_stop (the response was cut short)")

    def close_block(self, index: int) -> AssistantMessageEvent:
        """End event of the block at ``index``."""
        kind = self._kinds[index]
        if kind == "text":
            return self.builder.text_end(index)
        if kind == "thinking":
            return self.builder.thinking_end(
                index,
                signature=self._signatures.get(index),
                redacted=True if index in self._redacted else None,
            )
        given = self._inputs.pop(index, None)
        event = self.builder.toolcall_end(index, arguments=given)
        return event

    # -- internals -------------------------------------------------------------------------

    def _block_start(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        block = payload.get("content_block")
        if not isinstance(block, dict):
            raise MalformedStreamError("content_block_start without a content_block")
        kind = block.get("type")
        vendor_index = _index(payload)
        if kind == "text":
            start = self.builder.text_start()
            self._register(vendor_index, start.content_index, "text")
            out.append(start)
            if isinstance(block.get("text"), str) and block["text"]:
                out.append(self.builder.text_delta(block["text"], start.content_index))
        elif kind == "thinking":
            thinking_start = self.builder.thinking_start()
            self._register(vendor_index, thinking_start.content_index, "thinking")
            out.append(thinking_start)
            if isinstance(block.get("thinking"), str) and block["thinking"]:
                out.append(
                    self.builder.thinking_delta(block["thinking"], thinking_start.content_index)
                )
        elif kind == "redacted_thinking":
            redacted = self.builder.thinking_start(REDACTED_THINKING_TEXT)
            index = redacted.content_index
            self._register(vendor_index, index, "thinking")
            self._redacted.add(index)
            if isinstance(block.get("data"), str):
                self._signatures[index] = block["data"]
            out.append(redacted)
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise MalformedStreamError("a tool_use block without id or name")
            if self.tool_names is not None:
                name = self.tool_names.get(name.lower(), name)
            call = self.builder.toolcall_start(call_id, name)
            self._register(vendor_index, call.content_index, "toolCall")
            given = block.get("input")
            if isinstance(given, dict) and given:
                self._inputs[call.content_index] = given
            out.append(call)
        # Server-side tool blocks (web search and the like) are not part of pi's message model.

    def _block_delta(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        index = self._blocks.get(_index(payload))
        delta = payload.get("delta")
        if index is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            out.append(self.builder.text_delta(delta["text"], index))
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            out.append(self.builder.thinking_delta(delta["thinking"], index))
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            self._signatures[index] = self._signatures.get(index, "") + delta["signature"]
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            partial = delta["partial_json"]
            if partial:
                self._inputs.pop(index, None)  # streamed input replaces the placeholder
                out.append(self.builder.toolcall_delta(partial, index))

    def _register(self, vendor_index: int, index: int, kind: str) -> None:
        self._blocks[vendor_index] = index
        self._kinds[index] = kind

    def _take_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self._usage[key] = value
        # pi 1.6.0: the one-hour part of the cache writes, 0 from message_start on
        creation = usage.get("cache_creation")
        long_write = (
            creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else None
        )
        if isinstance(long_write, int) and not isinstance(long_write, bool):
            self._usage["ephemeral_1h"] = long_write
        self._usage.setdefault("ephemeral_1h", 0)
        self.builder.set_usage(
            make_usage(
                input=self._usage.get("input_tokens", 0),
                output=self._usage.get("output_tokens", 0),
                cache_read=self._usage.get("cache_read_input_tokens", 0),
                cache_write=self._usage.get("cache_creation_input_tokens", 0),
                cache_write_1h=self._usage["ephemeral_1h"],
                model=self.model,
            )
        )

    def _complete(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        self.close_open_blocks(out)
        reason = self._stop_reason
        if reason == "max_tokens":
            out.append(self.builder.done("length"))
        elif reason == "refusal":
            out.append(
                self.fail(
                    "The model declined to answer (stop_reason refusal)",
                    name="StreamError",
                    code="refusal",
                )
            )
        elif reason == "model_context_window_exceeded":
            out.append(
                self.fail(
                    "model_context_window_exceeded: the request exceeds the context window",
                    name="StreamError",
                    code=reason,
                )
            )
        else:
            out.append(self.builder.done())
        done = out[-1]
        if isinstance(done, StreamDone) and self.on_done is not None:
            self.on_done(done.message, self.served_model)
        return out


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise MalformedStreamError(f"a {payload.get('type')} event without an index")
    return index
