"""The ``openai-completions`` request: the Chat Completions body of one streamed response.

The messages in the shape Chat Completions takes (pi's conversions: user content with
images as data URLs, assistant text, reasoning and tool calls, tool results, the system
prompt as a ``system`` or ``developer`` message), the tools, and the body's other fields
(streaming usage, output limit, reasoning per :mod:`.openai_thinking`, sampling) as the
server's :class:`~.openai_compat.OpenAICompat` wants them. Pure; the provider
(:mod:`.openai_completions`) sends it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pitrio._prefix_chat import ChatPrefix, prepare_chat_prefix
from pitrio.actors.model_router.model_fields import sampling_params
from pitrio.actors.model_router.providers.base import output_limit
from pitrio.actors.model_router.providers.convert import (
    EncodedItems,
    PrefixCache,
    TranscriptPreparer,
    data_url,
    tool_result_text,
)
from pitrio.actors.model_router.providers.http import (
    HttpRequest,
    bearer_json_request,
    join_url,
)
from pitrio.actors.model_router.providers.openai_compat import (
    OpenAICompat,
    compat_of,
    facts_of,
    normalize_tool_id,
)
from pitrio.actors.model_router.providers.openai_thinking import thinking_fields
from pitrio.actors.model_router.providers.strict_tools import resolve_strict, tool_parameters
from pitrio.actors.model_router.thinking import effective_thinking_level
from pitrio.messages.agent import (
    AssistantMessage,
    LlmMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import dumps
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.convert import ConvertedView
from pitrio.messages.model import LlmContext, Model, StreamOptions, ToolSpec
from pitrio.messages.snapshot import Snapshot


def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    # As pi: a string stays a string; blocks (what a prompt makes, text only or not) go as
    # an array of parts, one per block, never joined into a string.
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        else:
            parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
    return parts


def _assistant(message: AssistantMessage, compat: OpenAICompat) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                texts.append(block.text)
        elif isinstance(block, ThinkingContent):
            # Reasoning is not sent back (most servers reject or ignore it), unless the server
            # wants it as text to keep its chain of thought.
            if compat.requires_thinking_as_text and block.thinking and not block.redacted:
                texts.append(block.thinking)
        else:
            calls.append(_tool_call(block))
    if not texts and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": dumps(call.arguments).decode()},
    }


class ChatMessages:
    """The Chat Completions ``messages`` of a transcript (without the system prompt), built one
    message at a time so the state after a prefix can be kept and resumed (:meth:`copy`).

    With ``encoded`` each entry is kept as its JSON (:class:`EncodedItems`), made once: a
    request then costs encoding its new messages, not the whole transcript again.
    """

    def __init__(self, model: Model, compat: OpenAICompat, *, encoded: bool = False) -> None:
        self.compat = compat
        self.preparer = TranscriptPreparer(model, normalize_tool_id(compat))
        self.entries = EncodedItems(encoded=encoded)
        self.images: list[ImageContent] = []
        self.last_role: str | None = None

    @classmethod
    def from_prefix(
        cls, model: Model, compat: OpenAICompat, prefix: ChatPrefix
    ) -> ChatMessages | None:
        """An encoded builder in the state one fed the prefix's messages would be in (its
        encoded items, pending tool calls and images), so further :meth:`feed` and
        :meth:`finish` go on alike; ``None`` when the prefix was made for other facts than
        ``model`` and ``compat``'s (the caller then feeds the messages itself)."""
        if prefix.facts != facts_of(model, compat, block_images=prefix.facts.block_images):
            return None
        builder = cls(model, compat, encoded=True)
        builder.entries = EncodedItems.restored(prefix.segments, prefix.tail, prefix.items)
        builder.last_role = prefix.last_role
        # Only a call's id and name are read (its synthetic result, the match of its result),
        # and a pending call is removed by its first match, found by id: the arguments and
        # signatures are not needed to go on alike.
        builder.preparer.pending = [
            ToolCall(id=call_id, name=name, arguments={}) for call_id, name in prefix.pending
        ]
        builder.images = [ImageContent(data=data, mime_type=mime) for mime, data in prefix.images]
        return builder

    def copy(self) -> ChatMessages:
        """An independent builder in the same state."""
        twin = ChatMessages.__new__(ChatMessages)
        twin.compat = self.compat
        twin.preparer = self.preparer.copy()
        twin.entries, twin.images = self.entries.copy(), list(self.images)
        twin.last_role = self.last_role
        return twin

    def _add(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        self.last_role = entry["role"]

    def _flush_images(self) -> None:
        # Tool messages carry text only: images of tool results follow as one user message.
        if self.images:
            parts: list[dict[str, Any]] = [
                {"type": "text", "text": "Images from the tool results:"}
            ]
            parts.extend(
                {"type": "image_url", "image_url": {"url": data_url(i)}} for i in self.images
            )
            self._add({"role": "user", "content": parts})
            self.images.clear()

    def _emit(self, message: LlmMessage) -> None:
        compat = self.compat
        if isinstance(message, ToolResultMessage):
            text = tool_result_text(message)
            block_images = [b for b in message.content if isinstance(b, ImageContent)]
            self.images.extend(block_images)
            tool: dict[str, Any] = {  # pi's key order
                "role": "tool",
                "content": text or ("(see the attached image)" if block_images else ""),
                "tool_call_id": message.tool_call_id,
            }
            if compat.requires_tool_result_name:
                tool["name"] = message.tool_name
            self._add(tool)
            return
        self._flush_images()
        if isinstance(message, UserMessage):
            if compat.requires_assistant_after_tool_result and self.last_role == "tool":
                self._add({"role": "assistant", "content": "I have processed the tool results."})
            content = _user_content(message)
            if not content and not isinstance(content, str):
                return  # no blocks at all: pi leaves the message out
            self._add({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            converted = _assistant(message, compat)
            if converted is not None:
                self._add(converted)

    def feed(self, message: LlmMessage) -> None:
        """Add one transcript message."""
        for prepared in self.preparer.feed(message):
            self._emit(prepared)

    def finish(self) -> list[Any]:
        """Every entry, the end's owed results and images included (this builder is left as
        it was, so more messages can still be fed)."""
        tail = self.preparer.copy().finish()
        if not tail and not self.images:
            return self.entries.items()
        # The owed end goes to a plain builder in the same state, so the encoded entries
        # need no copy.
        twin = ChatMessages.__new__(ChatMessages)
        twin.compat, twin.preparer = self.compat, self.preparer.copy()
        twin.entries, twin.images = EncodedItems(encoded=False), list(self.images)
        twin.last_role = self.last_role
        for message in tail:
            twin._emit(message)
        twin._flush_images()
        return [*self.entries.items(), *twin.entries.items()]


def _system_entry(model: Model, context: LlmContext, compat: OpenAICompat) -> list[Any]:
    if not context.system_prompt:
        return []
    role = "developer" if model.reasoning and compat.supports_developer_role else "system"
    return [{"role": role, "content": context.system_prompt}]


def build_messages(model: Model, context: LlmContext, compat: OpenAICompat) -> list[dict[str, Any]]:
    """``context`` as Chat Completions messages."""
    builder = ChatMessages(model, compat)
    for message in context.messages:
        builder.feed(message)
    return [*_system_entry(model, context, compat), *builder.finish()]


_PREFIXES: PrefixCache[ChatMessages] = PrefixCache()


def _stored_prefix(
    model: Model, compat: OpenAICompat, messages: Sequence[LlmMessage]
) -> tuple[ChatMessages, int] | None:
    """A builder holding the items of the stored messages that start ``messages`` (a resumed
    session's transcript, still undecoded: :class:`~pitrio.messages.convert.ConvertedView`),
    made from their JSON by :func:`pitrio._prefix_chat.prepare_chat_prefix` (here, or before
    by the launcher's child: ``ConvertedView.offered``), and how many it holds; ``None`` when
    ``messages`` do not start so or it converts none (issue 38: the first turn after a
    resume decodes and encodes only what that module does not take)."""
    head = messages.head() if isinstance(messages, Snapshot) else None
    if not isinstance(head, ConvertedView):
        return None
    facts = facts_of(model, compat, block_images=head.block_images)
    # The launcher's child's, when made for these facts (pitrio.actors.session.resumed_prefix);
    # else made here, as the child would.
    prefix = head.offered
    if prefix is None or prefix.facts != facts:
        prefix = prepare_chat_prefix(head.json_texts(), facts)
    if prefix is None:
        return None
    builder = ChatMessages.from_prefix(model, compat, prefix)
    return None if builder is None else (builder, prefix.consumed)


def encoded_messages(model: Model, context: LlmContext, compat: OpenAICompat) -> list[Any]:
    """:func:`build_messages` with each entry as its JSON, resumed from the previous request
    of the same transcript (:class:`PrefixCache`): only new messages are prepared and
    encoded."""
    builder = _PREFIXES.builder(
        model,
        context.messages,
        lambda: ChatMessages(model, compat, encoded=True),
        lambda messages: _stored_prefix(model, compat, messages),
    )
    return [*_system_entry(model, context, compat), *builder.finish()]


def completions_tool(tool: ToolSpec, supports_strict: bool) -> dict[str, Any]:
    """One tool declaration; ``strict`` only where the server takes it (some reject the field)."""
    strict = resolve_strict(tool, supports_strict)
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool_parameters(tool, strict),
    }
    if supports_strict:
        function["strict"] = bool(strict)
    return {"type": "function", "function": function}


def _has_tool_history(context: LlmContext) -> bool:
    for message in context.messages:
        if isinstance(message, ToolResultMessage):
            return True
        if isinstance(message, AssistantMessage) and any(
            isinstance(block, ToolCall) for block in message.content
        ):
            return True
    return False


def build_body(
    model: Model, context: LlmContext, options: StreamOptions, *, encoded: bool = False
) -> dict[str, Any]:
    """The JSON body of one streamed request (``encoded``: messages as reused JSON fragments,
    see :func:`encoded_messages`; else plain, and pure)."""
    compat = compat_of(model)
    messages = (
        encoded_messages(model, context, compat)
        if encoded
        else build_messages(model, context, compat)
    )
    body: dict[str, Any] = {
        "model": model.id,
        "messages": messages,
        "stream": True,
    }
    if compat.supports_usage_in_streaming:
        body["stream_options"] = {"include_usage": True}
    if compat.supports_store:
        body["store"] = False  # before the token limit: pi's key order
    max_tokens = output_limit(model, options)
    if max_tokens:
        body[compat.max_tokens_field] = max_tokens
    if context.tools:
        body["tools"] = [
            completions_tool(tool, compat.supports_strict_mode) for tool in context.tools
        ]
        if compat.zai_tool_stream:
            body["tool_stream"] = True
    elif compat.requires_tools_with_tool_history and _has_tool_history(context):
        body["tools"] = []  # servers that refuse tool calls in history without a tools list
    if compat.vllm_priority is not None:
        body["priority"] = compat.vllm_priority
    level = effective_thinking_level(model, options.reasoning)
    ceiling = body.get("max_tokens", body.get("max_completion_tokens"))
    body.update(thinking_fields(model, compat, level, ceiling))
    if compat.open_router_routing:
        body["provider"] = compat.open_router_routing
    if compat.vercel_gateway_routing:
        body["providerOptions"] = {"gateway": compat.vercel_gateway_routing}
    # pi 1.6.0: the model's samplingParams (then its thinking level's) go in last, over the
    # named fields.
    body.update(sampling_params(model, level))
    return body


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
) -> HttpRequest:
    """The HTTP request of one streamed response (pure)."""
    return bearer_json_request(
        join_url(model.base_url, "chat/completions"),
        build_body(model, context, options, encoded=True),
        api_key=api_key,
        headers=headers,
    )
