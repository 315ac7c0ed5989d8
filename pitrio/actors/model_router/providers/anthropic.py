"""The ``anthropic-messages`` provider: Anthropic's Messages API, streamed.

Request: ``POST {baseUrl}/v1/messages`` with ``x-api-key``, ``anthropic-version`` and
``stream: true``; thinking is a token budget (``thinking: {type: "enabled", budget_tokens}``,
which must fit inside ``max_tokens``); prompt caching marks the system prompt and the last
user turn with ``cache_control``. Answer: named SSE events ``message_start`` (id, model,
input usage), ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``thinking_delta``, ``signature_delta``, ``input_json_delta``) / ``content_block_stop`` per
block, ``message_delta`` (stop reason, output usage), ``message_stop``; ``ping`` keeps the
connection alive and ``error`` reports a failure mid-stream (e.g. ``overloaded_error``).
Thinking blocks keep their signature; ``redacted_thinking`` keeps its opaque ``data`` as the
signature, so both can be sent back unchanged on the next turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from pitrio.actors.model_router.providers.anthropic_forms import (
    adaptive_effort,
    adaptive_thinking,
    compat_of,
    tool_result,
    tools_of,
)
from pitrio.actors.model_router.providers.base import (
    OUTPUT_LIMIT_CAP,
    EventSender,
    ProviderSettings,
    output_limit,
)
from pitrio.actors.model_router.providers.claude_code import (
    claude_code_body,
    reply_tool_names,
)
from pitrio.actors.model_router.providers.convert import (
    EncodedItems,
    PrefixCache,
    TranscriptPreparer,
    encode_json_pieces,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    MalformedStreamError,
    SseParser,
    join_url,
    stream_error_message,
)
from pitrio.actors.model_router.thinking import (
    effective_thinking_level,
    fit_thinking_budget,
    thinking_budget,
)
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.agent import (
    AssistantMessage,
    LlmMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent

API = "anthropic-messages"
ANTHROPIC_VERSION = "2023-06-01"
BETA_FEATURES = "fine-grained-tool-streaming-2025-05-14"
THINKING_BETA = "interleaved-thinking-2025-05-14"
MIN_BUDGET = 1024
"""Anthropic's smallest accepted thinking budget."""
REDACTED_THINKING_TEXT = "[Reasoning redacted]"

_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def normalize_tool_id(value: str) -> str:
    """A tool-call id Anthropic accepts: ``[a-zA-Z0-9_-]``, at most 64 characters."""
    return _ID_INVALID.sub("_", value)[:64] or "tool"


def _cache_control(settings: ProviderSettings) -> dict[str, str] | None:
    if settings.cache_retention == "none":
        return None
    if settings.cache_retention == "long":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _user_blocks(content: str | tuple[TextContent | ImageContent, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
                }
            )
    return blocks


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif block.thinking_signature:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.thinking,
                        "signature": block.thinking_signature,
                    }
                )
            elif block.thinking.strip():
                # Unsigned thinking (a cut-off stream) is rejected as thinking: keep it as text.
                blocks.append({"type": "text", "text": block.thinking})
        else:
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
    return blocks


class AnthropicTurns:
    """A transcript as Messages API turns, built one message at a time so the state after a
    prefix can be kept and resumed (:meth:`copy`; see
    :class:`~pitrio.actors.model_router.providers.convert.TranscriptPreparer`).

    Only the turns from the newest user turn on can still change (a tool result joins the
    last user turn; the cache mark goes on the newest user turn), so the turns before it are
    encoded once (:class:`EncodedItems`) when ``encoded``.
    """

    def __init__(self, model: Model, *, encoded: bool = False) -> None:
        self.preparer = TranscriptPreparer(model, normalize_tool_id)
        self.turns: list[dict[str, Any]] = []  # the "tool_results" key marks grouped results
        self.encoded = encoded
        self.fragments = EncodedItems(encoded=True)  # the final form of turns[: len(...)]
        self.newest_user = -1

    def copy(self) -> AnthropicTurns:
        """An independent builder in the same state (open turns copied, so they can grow)."""
        twin = AnthropicTurns.__new__(AnthropicTurns)
        twin.preparer = self.preparer.copy()
        twin.turns = [
            {**turn, "content": list(turn["content"])} if index >= len(self.fragments) else turn
            for index, turn in enumerate(self.turns)
        ]
        twin.encoded, twin.fragments = self.encoded, self.fragments.copy()
        twin.newest_user = self.newest_user
        return twin

    def _add(self, turn: dict[str, Any]) -> None:
        self.turns.append(turn)
        if turn["role"] == "user":
            self.newest_user = len(self.turns) - 1
            if self.encoded:  # every turn before the newest user turn is final now
                while len(self.fragments) < self.newest_user:
                    self.fragments.append(_final_turn(self.turns[len(self.fragments)]))

    def _emit(self, message: LlmMessage) -> None:
        if isinstance(message, ToolResultMessage):
            block = tool_result(message)
            last = self.turns[-1] if self.turns else None
            if last and last["role"] == "user" and last.get("tool_results"):
                last["content"].append(block)
            else:
                self._add({"role": "user", "content": [block], "tool_results": True})
        elif isinstance(message, UserMessage):
            blocks = _user_blocks(message.content)
            if blocks:
                self._add({"role": "user", "content": blocks})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message)
            if blocks:
                self._add({"role": "assistant", "content": blocks})

    def feed(self, message: LlmMessage) -> None:
        """Add one transcript message."""
        for prepared in self.preparer.feed(message):
            self._emit(prepared)

    def finish(self, cache: dict[str, Any] | None = None) -> list[Any]:
        """Every turn (the end's owed results included), ``cache`` marking the newest user
        turn's last block; this builder is left as it was."""
        builder = self
        tail = self.preparer.copy().finish()
        if tail:
            builder = self.copy()
            for message in tail:
                builder._emit(message)
        done = len(builder.fragments)
        out: list[Any] = builder.fragments.items()
        for index in range(done, len(builder.turns)):
            turn = _final_turn(builder.turns[index])
            if cache is not None and index == builder.newest_user:
                # Cache everything up to the newest user turn: the next request shares it.
                content = list(turn["content"])
                content[-1] = {**content[-1], "cache_control": cache}
                turn = {**turn, "content": content}
            out.append(turn)
        return out


def _final_turn(turn: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in turn.items() if key != "tool_results"}


def build_messages(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    """``context``'s messages as Messages API turns (tool results grouped in user turns)."""
    builder = AnthropicTurns(model)
    for message in context.messages:
        builder.feed(message)
    return builder.finish()


_PREFIXES: PrefixCache[AnthropicTurns] = PrefixCache()


def encoded_turns(model: Model, context: LlmContext, cache: dict[str, Any] | None) -> list[Any]:
    """The turns of :func:`build_messages` (cache mark included), resumed from the previous
    request of the same transcript (:class:`PrefixCache`): only new messages are prepared
    and encoded."""
    builder = _PREFIXES.builder(
        model, context.messages, lambda: AnthropicTurns(model, encoded=True)
    )
    return builder.finish(cache)


def build_body(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    settings: ProviderSettings,
    *,
    encoded: bool = False,
) -> dict[str, Any]:
    """The JSON body of one streamed request (``encoded``: earlier turns as reused JSON
    fragments, see :func:`encoded_turns`; else plain, and pure)."""
    cache = _cache_control(settings)
    if encoded:
        messages = encoded_turns(model, context, cache)
    else:
        builder = AnthropicTurns(model)
        for message in context.messages:
            builder.feed(message)
        messages = builder.finish(cache)
    # The Messages API requires a limit: a model with none gets the cap.
    max_tokens = output_limit(model, options) or OUTPUT_LIMIT_CAP
    body: dict[str, Any] = {"model": model.id, "messages": messages, "max_tokens": max_tokens}
    body["stream"] = True
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
        if cache is not None:
            system["cache_control"] = cache
        body["system"] = [system]
    if context.tools:
        body["tools"] = tools_of(model, context, cache)
    if not model.reasoning:
        return body
    level = effective_thinking_level(model, options.reasoning)
    if level == "off":
        body["thinking"] = {"type": "disabled"}
    elif adaptive_thinking(model):
        body["thinking"] = {"type": "adaptive", "display": "summarized"}
        body["output_config"] = {"effort": adaptive_effort(model, level)}
    else:
        budget = thinking_budget(model, options.reasoning, settings.thinking_budgets)
        if budget is not None:
            total, budget = fit_thinking_budget(max_tokens, model.max_tokens, budget)
            body["max_tokens"] = total
            body["thinking"] = {
                "type": "enabled",
                "budget_tokens": budget or MIN_BUDGET,
                "display": "summarized",
            }
    return body


OAUTH_TOKEN_MARK = "sk-ant-oat"
"""What marks an Anthropic OAuth access token (pi's test)."""
OAUTH_BETAS = ("claude-code-20250219", "oauth-2025-04-20")
CLAUDE_CODE_VERSION = "2.1.75"
CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
"""The first system block pi sends with an OAuth token (the API requires it for those)."""


@attrs.frozen(kw_only=True)
class AnthropicRequest(HttpRequest):
    """A Messages API request; ``tool_names`` (with an OAuth token) maps the reply's tool
    names back (see :func:`reply_tool_names`); ``None``: the reply's names are kept."""

    tool_names: Mapping[str, str] | None = None


def is_oauth_token(model: Model, api_key: str | None) -> bool:
    """Whether ``api_key`` is a Claude Pro/Max OAuth token used as one (a Copilot model's
    bearer token never is, whatever it holds: pi checks Copilot first)."""
    return (
        bool(api_key)
        and OAUTH_TOKEN_MARK in (api_key or "")
        and (model.provider != "github-copilot")
    )


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
    settings: ProviderSettings,
) -> HttpRequest:
    """The HTTP request of one streamed response (pure)."""
    oauth_token = is_oauth_token(model, api_key)
    # With an OAuth token the tool names are rewritten, so the plain (not pre-encoded)
    # turns are built: the encoded prefix holds the names as given.
    body = build_body(model, context, options, settings, encoded=not oauth_token)
    # pi's betas: fine-grained tool streaming where the tools cannot stream eagerly, and
    # interleaved thinking for every model but the adaptive ones (it is built into those).
    beta: list[str] = []
    if context.tools and compat_of(model).get("supportsEagerToolInputStreaming") is False:
        beta.append(BETA_FEATURES)
    if not adaptive_thinking(model):
        beta.append(THINKING_BETA)
    if oauth_token:  # a Claude Pro/Max token (pitrio login anthropic): Claude Code's identity
        body = claude_code_body(body)
        beta = [*OAUTH_BETAS, *beta]
        identity: dict[str, Any] = {"type": "text", "text": CLAUDE_CODE_IDENTITY}
        cache = _cache_control(settings)
        if cache is not None:
            identity["cache_control"] = cache
        body["system"] = [identity, *body.get("system", [])]
    request_headers = {
        "content-type": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
        # pi's client is the Anthropic SDK, told it may run in a browser.
        "anthropic-dangerous-direct-browser-access": "true",
    }
    if beta:
        request_headers["anthropic-beta"] = ",".join(beta)
    if oauth_token:
        request_headers["authorization"] = f"Bearer {api_key}"
        request_headers["user-agent"] = f"claude-cli/{CLAUDE_CODE_VERSION}"
        request_headers["x-app"] = "cli"
    elif api_key and model.provider == "github-copilot":  # Copilot's token is a bearer token
        request_headers["authorization"] = f"Bearer {api_key}"
    elif api_key:
        request_headers["x-api-key"] = api_key
        if compat_of(model).get("authHeader"):
            request_headers["authorization"] = f"Bearer {api_key}"
    request_headers.update({name.lower(): value for name, value in headers.items()})
    return AnthropicRequest(
        url=join_url(model.base_url, "v1/messages"),
        headers=request_headers,
        body=encode_json_pieces(body),
        tool_names=reply_tool_names(context) if oauth_token else None,
    )


# -- the parser ------------------------------------------------------------------------------


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

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event (its JSON ``type`` names it; the SSE name is a fallback)."""
        payload = self.json(data, event)
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
                self.builder.set_response_id(started.get("id"))
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
        self.builder.set_usage(
            make_usage(
                input=self._usage.get("input_tokens", 0),
                output=self._usage.get("output_tokens", 0),
                cache_read=self._usage.get("cache_read_input_tokens", 0),
                cache_write=self._usage.get("cache_creation_input_tokens", 0),
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
        return out


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise MalformedStreamError(f"a {payload.get('type')} event without an index")
    return index


class AnthropicProvider(HttpProvider):
    """The ``anthropic-messages`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    accept = "application/json"  # what pi's Anthropic client asks for, streaming or not
    error_style = "anthropic"

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
        return build_request(
            model, context, options, api_key=api_key, headers=headers, settings=self.settings
        )

    def new_parser(self, model: Model) -> AnthropicParser:
        """A parser for one response of ``model``."""
        return AnthropicParser(model)

    async def send_request(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> None:
        """As the base, the parser told first how the request renamed its tools."""
        if isinstance(parser, AnthropicParser) and isinstance(request, AnthropicRequest):
            parser.tool_names = request.tool_names
        await super().send_request(request, parser, send)
