"""The Responses API's event stream (``response.*`` server-sent events) as pi 1.6.0 reads it:
output items become text, thinking and tool-call blocks, the final ``response.completed``
gives the usage and stop reason. Pure parsing; :mod:`.openai_responses` builds the requests and
its Codex and Azure variants reuse this parser.
"""

from __future__ import annotations

from typing import Any

import orjson

from pitrio.actors.model_router.providers.convert import (
    positive_int,
)
from pitrio.actors.model_router.providers.http import (
    MalformedStreamError,
    SseParser,
)
from pitrio.actors.model_router.stream_builder import parse_arguments
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.model import Model
from pitrio.messages.stream import AssistantMessageEvent

API = "openai-responses"
"""The API kind this parser names in its messages."""


class OpenAIResponsesParser(SseParser):
    """Responses API stream events in, assistant stream events out (sans-IO)."""

    api_label = API

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._items: dict[str, int] = {}  # output item id -> content index
        self._kinds: dict[int, str] = {}
        self._signatures: dict[int, str] = {}
        self._summary_parts: dict[int, int] = {}

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event (named by its JSON ``type``)."""
        payload = self.json(data, event)
        if not isinstance(payload, dict):
            raise MalformedStreamError(f"expected a JSON object in a {event!r} event")
        kind = payload.get("type", event)
        if kind == "error":
            # pi's own text for this event (the SDK passes it through).
            code = payload.get("code")
            message = f"Error Code {_js_text(code)}: {_js_text(payload.get('message'))}"
            return [self.fail(message, name="StreamError", code=_code(code))]
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        response = payload.get("response")
        if kind in ("response.created", "response.in_progress") and isinstance(response, dict):
            self.builder.set_response_id(response.get("id"))
        elif kind == "response.output_item.added":
            self._item_added(payload.get("item"), out)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            index = self._block_index(payload, out, "text")
            out.append(self.builder.text_delta(_delta(payload), index))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            index = self._block_index(payload, out, "thinking")
            out.append(self.builder.thinking_delta(_delta(payload), index))
        elif kind == "response.reasoning_summary_part.added":
            index = self._block_index(payload, out, "thinking")
            count = self._summary_parts.get(index, 0)
            self._summary_parts[index] = count + 1
            if count:  # separate the summary's parts like paragraphs
                out.append(self.builder.thinking_delta("\n\n", index))
        elif kind == "response.function_call_arguments.delta":
            call_index = self._items.get(str(payload.get("item_id")))
            if call_index is not None and call_index in self.builder.open_indexes:
                out.append(self.builder.toolcall_delta(_delta(payload), call_index))
        elif kind == "response.output_item.done":
            self._item_done(payload.get("item"), out)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            out.extend(self._complete(kind, response if isinstance(response, dict) else {}))
        return out

    def on_end(self) -> list[AssistantMessageEvent]:
        """The body ended without a terminal event: the response was cut short."""
        raise MalformedStreamError("ended without response.completed (the response was cut short)")

    def close_block(self, index: int) -> AssistantMessageEvent:
        """End event of the block at ``index``."""
        kind = self._kinds[index]
        if kind == "text":
            return self.builder.text_end(index, signature=self._signatures.get(index))
        if kind == "thinking":
            return self.builder.thinking_end(index, signature=self._signatures.get(index))
        return self.builder.toolcall_end(index)

    # -- internals -------------------------------------------------------------------------

    def _item_added(self, item: Any, out: list[AssistantMessageEvent]) -> None:
        if not isinstance(item, dict):
            raise MalformedStreamError("response.output_item.added without an item")
        item_id = str(item.get("id", ""))
        kind = item.get("type")
        if kind == "reasoning":
            start = self.builder.thinking_start()
            self._register(item_id, start.content_index, "thinking")
            out.append(start)
        elif kind == "function_call":
            call_id = item.get("call_id")
            name = item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise MalformedStreamError("a function_call item without call_id or name")
            call = self.builder.toolcall_start(f"{call_id}|{item_id}", name)
            self._register(item_id, call.content_index, "toolCall")
            out.append(call)
        # A "message" item opens its text block at its first delta.

    def _item_done(self, item: Any, out: list[AssistantMessageEvent]) -> None:
        if not isinstance(item, dict):
            raise MalformedStreamError("response.output_item.done without an item")
        item_id = str(item.get("id", ""))
        index = self._items.get(item_id)
        if index is None or index not in self.builder.open_indexes:
            return
        kind = item.get("type")
        if kind == "reasoning":
            self._signatures[index] = orjson.dumps(item).decode()
        elif kind == "message":
            signature: dict[str, Any] = {"v": 1, "id": item_id}
            if isinstance(item.get("phase"), str):
                signature["phase"] = item["phase"]
            self._signatures[index] = orjson.dumps(signature).decode()
        elif kind == "function_call":
            raw = item.get("arguments")
            if isinstance(raw, str) and self._kinds[index] == "toolCall":
                arguments = parse_arguments(raw) if raw.strip() else {}
                out.append(self.builder.toolcall_end(index, arguments=arguments or {}))
                return
        out.append(self.close_block(index))

    def _block_index(
        self, payload: dict[str, Any], out: list[AssistantMessageEvent], kind: str
    ) -> int:
        """The open ``kind`` block of the payload's item: started (and announced in ``out``)
        when the item has none open yet."""
        item_id = str(payload.get("item_id", ""))
        index = self._items.get(item_id)
        if index is None or index not in self.builder.open_indexes:
            start = self.builder.text_start() if kind == "text" else self.builder.thinking_start()
            self._register(item_id, start.content_index, kind)
            out.append(start)
            return start.content_index
        return index

    def _register(self, item_id: str, index: int, kind: str) -> None:
        self._items[item_id] = index
        self._kinds[index] = kind

    def _complete(self, kind: str, response: dict[str, Any]) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        usage = response.get("usage")
        if isinstance(usage, dict):
            details = usage.get("input_tokens_details")
            cached = positive_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
            output_details = usage.get("output_tokens_details")
            reasoning = (
                positive_int(output_details.get("reasoning_tokens"))
                if isinstance(output_details, dict)
                else 0
            )
            self.builder.set_usage(
                make_usage(
                    input=max(0, positive_int(usage.get("input_tokens")) - cached),
                    output=positive_int(usage.get("output_tokens")),
                    cache_read=cached,
                    reasoning=reasoning,
                    model=self.model,
                )
            )
        if isinstance(response.get("id"), str):
            self.builder.set_response_id(response["id"])
        status = response.get("status")
        if isinstance(status, str):
            # pi 1.6.0: the status, with an incomplete response's reason after a dot
            incomplete = response.get("incomplete_details")
            why = incomplete.get("reason") if isinstance(incomplete, dict) else None
            raw = (
                f"{status}.{why}" if isinstance(why, str) and kind != "response.failed" else status
            )
            self.builder.set_raw_stop_reason(raw)
        self.close_open_blocks(out)
        if kind == "response.failed":
            error = response.get("error")
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            code = None
            if isinstance(error, dict):
                code = error.get("code") or None
                said = error.get("message") or "no message"
                text = f"{_js_text(code or 'unknown')}: {_js_text(said)}"
            elif reason:
                text = f"incomplete: {_js_text(reason)}"
            else:
                text = "Unknown error (no error details in response)"
            out.append(self.fail(text, name="StreamError", code=_code(code)))
        elif kind == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            if reason == "max_output_tokens":
                out.append(self.builder.done("length"))
            else:
                out.append(
                    self.fail(
                        f"The response is incomplete ({reason or 'no reason given'})",
                        name="StreamError",
                        code=str(reason) if reason else None,
                    )
                )
        else:
            out.append(self.builder.done())
        return out


def _js_text(value: Any) -> str:
    """``value`` as a JavaScript template literal shows it (pi builds these texts so)."""
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _code(value: Any) -> str | None:
    return None if value is None else str(value)


def _delta(payload: dict[str, Any]) -> str:
    delta = payload.get("delta")
    if not isinstance(delta, str):
        raise MalformedStreamError(f"a {payload.get('type')} event without a text delta")
    return delta
