"""The ``openai-completions`` provider: OpenAI Chat Completions and the many servers copying it.

Request: ``POST {baseUrl}/chat/completions`` with ``stream: true`` (and ``stream_options:
{include_usage: true}`` where supported, so usage arrives in the last chunk). Answer: SSE
``data:`` lines, each a ``chat.completion.chunk`` whose ``choices[0].delta`` carries
``content``, reasoning text (``reasoning_content``, ``reasoning`` or ``reasoning_text``,
depending on the server) and ``tool_calls`` deltas keyed by ``index``; ``finish_reason``
comes on the last choice chunk and ``data: [DONE]`` ends the stream.

OpenAI-compatible servers differ; :class:`~.openai_compat.OpenAICompat` holds the differences,
detected from the provider and base URL and overridden by the model's ``compat`` (pi's field
names; :mod:`.openai_compat`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pitrio.actors.model_router.providers.chunk_template import ChunkTemplate, learn
from pitrio.actors.model_router.providers.convert import (
    positive_int,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    MalformedStreamError,
    SseParser,
    stream_error_message,
)
from pitrio.actors.model_router.providers.openai_compat import (
    OpenAICompat,
    ThinkingFormat,
    detect_compat,
    normalize_tool_id,
)
from pitrio.actors.model_router.providers.openai_completions_request import (
    ChatMessages,
    build_body,
    build_messages,
    build_request,
    encoded_messages,
)
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.delta_run import StreamItem
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent

API = "openai-completions"
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
"""Where servers put reasoning text in a delta (DeepSeek/vLLM, OpenRouter/Ollama, others)."""
_TEMPLATES_TRIED = 4
"""Chunk templates learned per response before learning needs them to be used (see _learn)."""

# -- the parser ------------------------------------------------------------------------------


class OpenAICompletionsParser(SseParser):
    """Chat Completions chunks in, assistant stream events out (sans-IO)."""

    api_label = API

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._kinds: dict[int, str] = {}  # content index -> "text" | "thinking" | "toolCall"
        # As pi: one text and one thinking block per response, however the deltas alternate;
        # every block stays open until the response ends.
        self._text: int | None = None
        self._thinking: int | None = None
        self._calls: dict[int, int] = {}  # the server's tool-call index -> content index
        self._reasoning_field: dict[int, str] = {}
        self._finish_reason: str | None = None
        self._identified = False  # the response id and a differing model both recorded
        self._response_id: str | None = None
        self._response_model: str | None = None
        self._generated_ids = 0
        # Chunks alike but for one delta string are read from their text (issue 38).
        self._templates: list[ChunkTemplate] = []
        self._learned = 0
        self._template_hits = 0

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one ``data:`` chunk (``[DONE]`` ends the stream)."""
        for template in self._templates:
            value = template.value(data)
            if value is not None:
                # The learned chunk with another string: what the whole parse would do.
                self._template_hits += 1
                read: list[AssistantMessageEvent] = []
                if template.field == "content":
                    self._content(value, read)
                else:
                    self._reasoning(template.field, value, read)
                return read
        if data == "[DONE]" or data.strip() == "[DONE]":
            return self._complete()
        chunk = self.json(data, event)
        if not isinstance(chunk, dict):
            raise MalformedStreamError(f"expected a JSON object, got {data[:80]!r}")
        if chunk.get("error"):
            message, kind = stream_error_message(chunk, "openai-completions")
            return [self.fail(message, name="StreamError", code=kind)]
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        if not self._identified:
            self._identify(chunk)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            # pi's order within a chunk: usage, the finish reason, then the deltas.
            choice_usage = choice.get("usage")
            if not isinstance(usage, dict) and isinstance(choice_usage, dict):
                self._usage(choice_usage)  # Moonshot's place for it
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self._finish_reason = finish
                self.builder.set_raw_stop_reason(finish)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, out)
                if choice_usage is None and finish is None and not isinstance(usage, dict):
                    self._learn(data, chunk, delta)
        return out

    def feed_all(
        self, decoded: list[tuple[str, str]]
    ) -> tuple[list[StreamItem], list[AssistantMessageEvent], int]:
        """As :meth:`SseParser.feed_all`; chunks that are the content template's with another
        string are gathered and handed to the builder as one run (issue 38: the calls per
        chunk were most of a delta's parse), which comes out as one :class:`DeltaRun` item.
        Expanded, the events are those of one feed per chunk."""
        if self.final is not None:
            return super().feed_all(decoded)
        read: list[StreamItem] = []
        position, count = 0, len(decoded)
        while position < count:
            # The templates in on_event's order (one may be learned from the chunk fed last):
            # the first that reads the chunk here reads as many after it as it can.
            texts: list[str] = []
            for template in self._templates:
                texts, position = template.run(decoded, position)
                if texts:  # what on_event does for each of them
                    self._template_hits += len(texts)
                    if template.field == "content":
                        read += self.builder.text_run(texts, self._open("text", read))
                    else:
                        index = self._open("thinking", read)
                        self._reasoning_field.setdefault(index, template.field)
                        read += self.builder.thinking_run(texts, index)
                    break
            if texts:
                continue  # another template may read the chunk that ended the run
            event, data = decoded[position]
            position += 1
            events = self.feed(event, data)
            if self.final is not None:
                return read, events, position
            read += events
        return read, [], count

    def _learn(self, data: str, chunk: dict[str, Any], delta: dict[str, Any]) -> None:
        """Keep a template of ``chunk`` if its only effect was one delta string (content or
        one reasoning field): later chunks like it are read from their text."""
        if self._learned >= _TEMPLATES_TRIED and self._template_hits < 16 * self._learned:
            return  # a server whose chunks differ in more than the text: stop trying
        if isinstance(delta.get("tool_calls"), list):
            return
        streamed = [
            field
            for field in ("content", *REASONING_FIELDS)
            if isinstance(delta.get(field), str) and delta[field]
        ]
        if len(streamed) != 1 or any(t.field == streamed[0] for t in self._templates):
            return
        self._learned += 1
        template = learn(data, ("choices", 0, "delta", streamed[0]), streamed[0])
        if template is not None:
            self._templates.append(template)

    def _identify(self, chunk: dict[str, Any]) -> None:
        # As pi: the first chunk id is the response id; the model is recorded only when a
        # chunk names one other than the model asked for (most servers echo the request's).
        response_id = self._response_id
        if response_id is None:
            chunk_id = chunk.get("id")
            if isinstance(chunk_id, str) and chunk_id:
                response_id = self._response_id = chunk_id
        response_model = self._response_model
        if response_model is None:
            named = chunk.get("model")
            if isinstance(named, str) and named and named != self.model.id:
                response_model = self._response_model = named
        if response_id is not None or response_model is not None:
            self.builder.set_response_id(response_id, response_model)
        self._identified = response_id is not None and response_model is not None

    def on_end(self) -> list[AssistantMessageEvent]:
        """The body ended: complete if a ``finish_reason`` came (some servers omit ``[DONE]``)."""
        if self._finish_reason is None:
            raise MalformedStreamError(
                "ended without a finish_reason or [DONE] (the response was cut short)"
            )
        return self._complete()

    def close_block(self, index: int) -> AssistantMessageEvent:
        """End event of the block at ``index``."""
        kind = self._kinds[index]
        if kind == "text":
            return self.builder.text_end(index)
        if kind == "thinking":
            return self.builder.thinking_end(index, signature=self._reasoning_field.get(index))
        return self.builder.toolcall_end(index)

    # -- internals -------------------------------------------------------------------------

    def _delta(self, delta: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        # pi's order within one chunk: content, then reasoning, then tool calls.
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._content(content, out)
        for field in REASONING_FIELDS:
            value = delta.get(field)
            if isinstance(value, str) and value:
                self._reasoning(field, value, out)
                break
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                if isinstance(call, dict):
                    self._tool_call_delta(call, position, out)

    def _content(self, text: str, out: list[AssistantMessageEvent]) -> None:
        index = self._open("text", out)
        out.append(self.builder.text_delta(text, index))

    def _reasoning(self, field: str, text: str, out: list[AssistantMessageEvent]) -> None:
        index = self._open("thinking", out)
        self._reasoning_field.setdefault(index, field)
        out.append(self.builder.thinking_delta(text, index))

    def _open(self, kind: str, out: list[AssistantMessageEvent] | list[StreamItem]) -> int:
        """The response's text or thinking block, opened on its first delta (the other blocks
        stay open: pi ends them all when the response ends)."""
        current = self._text if kind == "text" else self._thinking
        if current is not None:
            return current
        start = self.builder.text_start() if kind == "text" else self.builder.thinking_start()
        out.append(start)
        index = start.content_index
        self._kinds[index] = kind
        if kind == "text":
            self._text = index
        else:
            self._thinking = index
        return index

    def _tool_call_delta(
        self, call: dict[str, Any], position: int, out: list[AssistantMessageEvent]
    ) -> None:
        key = call.get("index", position)
        if not isinstance(key, int):
            raise MalformedStreamError(f"tool call index {key!r} is not a number")
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        assert isinstance(function, dict)
        index = self._calls.get(key)
        if index is None:
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                self._generated_ids += 1
                call_id = f"call_{self._generated_ids}"
            name = function.get("name")
            start = self.builder.toolcall_start(call_id, name if isinstance(name, str) else "")
            out.append(start)
            index = start.content_index
            self._calls[key] = index
            self._kinds[index] = "toolCall"
        # pi reports every piece of a call, one with no argument text as an empty delta.
        arguments = function.get("arguments")
        delta = arguments if isinstance(arguments, str) else ""
        out.append(self.builder.toolcall_delta(delta, index))

    def _usage(self, usage: dict[str, Any]) -> None:
        prompt = positive_int(usage.get("prompt_tokens"))
        completion = positive_int(usage.get("completion_tokens"))
        details = usage.get("prompt_tokens_details")
        details = details if isinstance(details, dict) else {}
        cached = positive_int(details.get("cached_tokens")) or positive_int(
            usage.get("prompt_cache_hit_tokens")
        )
        written = positive_int(details.get("cache_write_tokens"))
        output_details = usage.get("completion_tokens_details")
        output_details = output_details if isinstance(output_details, dict) else {}
        reasoning = positive_int(output_details.get("reasoning_tokens")) or positive_int(
            usage.get("reasoning_tokens")
        )
        self.builder.set_usage(
            make_usage(
                input=max(0, prompt - cached - written),
                output=completion,
                cache_read=cached,
                cache_write=written,
                reasoning=reasoning,  # always written by pi 1.6.0, 0 when not reported
                model=self.model,
            )
        )

    def _complete(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        self.close_open_blocks(out)
        finish = self._finish_reason
        if finish == "length" or finish == "max_tokens":
            out.append(self.builder.done("length"))
        elif finish == "content_filter":
            out.append(
                self.fail(
                    "The provider's content filter stopped the response "
                    "(finish_reason content_filter)",
                    name="StreamError",
                    code="content_filter",
                )
            )
        elif finish == "error":
            out.append(
                self.fail(
                    "The provider reported an error (finish_reason error)",
                    name="StreamError",
                    code="error",
                )
            )
        else:
            # "tool_calls", "function_call", "stop" with calls: toolUse; otherwise stop.
            out.append(self.builder.done())
        return out


class OpenAICompletionsProvider(HttpProvider):
    """The ``openai-completions`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    error_style = "openai-completions"

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """See :func:`build_request`."""
        return build_request(model, context, options, api_key=api_key, headers=headers)

    def new_parser(self, model: Model) -> OpenAICompletionsParser:
        """A parser for one response of ``model``."""
        return OpenAICompletionsParser(model)


__all__ = [
    "API",
    "REASONING_FIELDS",
    "ChatMessages",
    "OpenAICompat",
    "OpenAICompletionsParser",
    "OpenAICompletionsProvider",
    "ThinkingFormat",
    "build_body",
    "build_messages",
    "build_request",
    "detect_compat",
    "encoded_messages",
    "normalize_tool_id",
]
