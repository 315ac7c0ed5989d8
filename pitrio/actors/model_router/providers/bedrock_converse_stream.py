"""The ``bedrock-converse-stream`` provider: Amazon Bedrock's ConverseStream API.

Request: ``POST {baseUrl}/model/{modelId}/converse-stream`` with a JSON body (``messages``,
``system``, ``inferenceConfig``, ``toolConfig``, ``additionalModelRequestFields``), signed
with AWS Signature V4 for the service ``bedrock`` (or ``Authorization: Bearer`` with
``AWS_BEARER_TOKEN_BEDROCK``). Answer: an ``application/vnd.amazon.eventstream`` body of binary
frames (prelude, headers, payload, CRCs); the header ``:event-type`` names each event:
``messageStart``, ``contentBlockStart`` (a tool call's id and name),
``contentBlockDelta`` (``text``, ``toolUse.input`` JSON pieces, ``reasoningContent``
text/signature), ``contentBlockStop``, ``messageStop`` (stop reason), ``metadata`` (usage).
A frame with ``:message-type: exception`` reports a failure mid-stream.

botocore does the AWS parts only: the credentials chain, SigV4 signing
(:mod:`.bedrock_aws`) and the frame decoding (``EventStreamBuffer``); the HTTP I/O is the
shared pool's, like every other provider's. The request itself is built in
:mod:`.bedrock_converse_forms`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from pitrio.actors.model_router.providers import bedrock_aws
from pitrio.actors.model_router.providers.bedrock_converse_forms import (
    API,
    build_unsigned,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    MalformedStreamError,
    SseParser,
    _send_all,
)
from pitrio.actors.model_router.providers.retry import RetryPolicy
from pitrio.actors.model_router.usage import make_usage
from pitrio.errors import CredentialError, ProviderError
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamError

if TYPE_CHECKING:
    import httpx

    from pitrio.actors.model_router.provider_hooks import ProviderHooks
    from pitrio.actors.model_router.providers.base import EventSender
    from pitrio.actors.model_router.providers.http11_wire import DirectResponse

EVENT_STREAM = "application/vnd.amazon.eventstream"

ERROR_PREFIXES = {
    "InternalServerException": "Internal server error",
    "ModelStreamErrorException": "Model stream error",
    "ValidationException": "Validation error",
    "ThrottlingException": "Throttling error",
    "ServiceUnavailableException": "Service unavailable",
}


# -- the parser ------------------------------------------------------------------------------


def exception_text(kind: str, message: str) -> str:
    """pi's text of a Bedrock exception: ``"<readable prefix>: <message>"``."""
    name = kind[:1].upper() + kind[1:]  # event-stream exception types are lower camel case
    return f"{ERROR_PREFIXES.get(name, name)}: {message}"


_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


class BedrockParser(SseParser):
    """ConverseStream events in (``:event-type``, JSON payload), stream events out (sans-IO).

    :meth:`feed_exception` takes an exception frame.
    """

    api_label = API

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._blocks: dict[int, int] = {}  # contentBlockIndex -> content index
        self._kinds: dict[int, str] = {}
        self._signatures: dict[int, str] = {}
        self._stop: str | None = None

    def feed_exception(self, kind: str, payload: bytes) -> list[AssistantMessageEvent]:
        """The final error for an exception frame (``:exception-type`` ``kind``)."""
        if self.final is not None:
            return []
        message = ""
        try:
            document = orjson.loads(payload)
        except orjson.JSONDecodeError:
            document = None
        if isinstance(document, dict):
            message = str(document.get("message") or document.get("Message") or "")
        else:
            message = payload.decode("utf-8", "replace")
        return [self.fail(exception_text(kind, message), name="StreamError", code=kind)]

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one ConverseStream event."""
        payload = self.json(data, event)
        if not isinstance(payload, dict):
            raise MalformedStreamError(f"expected a JSON object in a {event!r} event")
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        if event == "contentBlockStart":
            start = payload.get("start")
            use = start.get("toolUse") if isinstance(start, dict) else None
            if isinstance(use, dict):
                call = self.builder.toolcall_start(
                    str(use.get("toolUseId") or ""), str(use.get("name") or "")
                )
                self._register(_index(payload), call.content_index, "toolCall")
                out.append(call)
        elif event == "contentBlockDelta":
            self._delta(payload, out)
        elif event == "contentBlockStop":
            index = self._blocks.pop(_index(payload), None)
            if index is not None and index in self.builder.open_indexes:
                out.append(self.close_block(index))
        elif event == "messageStop":
            self._stop = str(payload.get("stopReason"))
            self.builder.set_raw_stop_reason(self._stop)
        elif event == "metadata":
            self._usage(payload.get("usage"))
            out.extend(self._complete())
        return out

    def on_end(self) -> list[AssistantMessageEvent]:
        """The body ended: complete if ``messageStop`` came (``metadata`` is optional)."""
        if self._stop is None:
            raise MalformedStreamError("ended without messageStop (the response was cut short)")
        return self._complete()

    def close_block(self, index: int) -> AssistantMessageEvent:
        """End event of the block at ``index``."""
        kind = self._kinds[index]
        if kind == "text":
            return self.builder.text_end(index)
        if kind == "thinking":
            return self.builder.thinking_end(index, signature=self._signatures.get(index))
        return self.builder.toolcall_end(index)

    def _delta(self, payload: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        vendor = _index(payload)
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            return
        index = self._blocks.get(vendor)
        if isinstance(delta.get("text"), str):
            if index is None:
                start = self.builder.text_start()
                index = self._register(vendor, start.content_index, "text")
                out.append(start)
            if self._kinds[index] == "text":
                out.append(self.builder.text_delta(delta["text"], index))
        elif isinstance(delta.get("toolUse"), dict):
            piece = delta["toolUse"].get("input")
            if index is not None and self._kinds[index] == "toolCall" and isinstance(piece, str):
                out.append(self.builder.toolcall_delta(piece, index))
        elif isinstance(delta.get("reasoningContent"), dict):
            reasoning = delta["reasoningContent"]
            if index is None:
                opened = self.builder.thinking_start()
                index = self._register(vendor, opened.content_index, "thinking")
                out.append(opened)
            if self._kinds[index] != "thinking":
                return
            if isinstance(reasoning.get("text"), str) and reasoning["text"]:
                out.append(self.builder.thinking_delta(reasoning["text"], index))
            if isinstance(reasoning.get("signature"), str):
                self._signatures[index] = self._signatures.get(index, "") + reasoning["signature"]

    def _register(self, vendor: int, index: int, kind: str) -> int:
        self._blocks[vendor] = index
        self._kinds[index] = kind
        return index

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return

        def count(key: str) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        self.builder.set_usage(
            make_usage(
                input=count("inputTokens"),
                output=count("outputTokens"),
                cache_read=count("cacheReadInputTokens"),
                cache_write=count("cacheWriteInputTokens"),
                model=self.model,
            )
        )

    def _complete(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        self.close_open_blocks(out)
        reason = _STOP_REASONS.get(self._stop or "")
        if reason is None:  # pi's words for a stop reason it does not know
            out.append(self.fail("An unknown error occurred", name="StreamError", code=self._stop))
        else:
            out.append(self.builder.done(reason))  # type: ignore[arg-type]
        return out


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("contentBlockIndex")
    if not isinstance(index, int) or isinstance(index, bool):
        raise MalformedStreamError("an event without a contentBlockIndex")
    return index


# -- the I/O shell ---------------------------------------------------------------------------


class BedrockProvider(HttpProvider):
    """The ``bedrock-converse-stream`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    error_style = "openai"
    accept = ""  # pi's AWS client sends no Accept header

    def retry_policy(self) -> RetryPolicy:
        """pi's AWS client's standard retry mode: three attempts whatever
        ``retry.provider.maxRetries`` says (pi does not hand it to that client), 100 ms
        doubling with full jitter."""
        return RetryPolicy(
            max_retries=2,
            initial_delay=0.1,
            max_delay=20.0,
            jitter=1.0,
            max_retry_delay_ms=self.pool.settings.max_retry_delay_ms,
        )

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """The unsigned request (see :func:`build_unsigned`); :meth:`prepare` signs it."""
        return build_unsigned(
            model, context, options, headers=headers, settings=self.settings,
            env=self.credentials.env,
        )  # fmt: skip

    def new_parser(self, model: Model) -> BedrockParser:
        """A parser for one response of ``model``."""
        return BedrockParser(model)

    async def prepare(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> HttpRequest:
        """Build the request for the endpoint and region pi's client would pick, and
        authorise it (:mod:`.bedrock_aws`). Raises :class:`CredentialError` (no credentials,
        no botocore) or :class:`ProviderError` (content Bedrock cannot take)."""
        env = self.credentials.env_for(model.provider)
        headers = await self.credentials.resolve_headers(
            model.headers, f"models.json providers.{model.provider}", model.provider
        )
        base_url, region = await bedrock_aws.resolve_endpoint(model, env)
        try:
            request = build_unsigned(
                model, context, options, headers=headers, settings=self.settings, env=env,
                base_url=base_url,
            )  # fmt: skip
        except ValueError as exc:  # an image type Bedrock does not take
            raise ProviderError(str(exc)) from None
        # A Bedrock API key (auth.json, models.json apiKey, the request's) goes as a bearer
        # token, as in pi 1.6.0; without one, the AWS credentials sign the request.
        try:
            api_key = await self.credentials.api_key(model.provider, options.api_key)
        except CredentialError:
            api_key = None
        return await bedrock_aws.authorise(request, env, region, api_key)

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions, send: EventSender
    ) -> None:
        """Stream one response (a StreamFn); a request that cannot be built or authorised
        ends as an ``error`` event naming why, before anything is sent."""
        parser = self.new_parser(model)
        parser.redact = self.credentials.redact
        parser.diagnostics = self.settings.diagnostics
        try:
            request = await self.prepare(model, context, options)
        except (CredentialError, ProviderError) as exc:
            await send.send(parser.fail(str(exc), name=type(exc).__name__))
            return
        # The request is signed (SigV4): headers and payload stay as signed; its answers are
        # still reported (after_provider_response).
        await self.send_request(attrs.evolve(request, hooks=options.hooks), parser, send)

    def describe_http_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> tuple[str, str | None]:
        """``"<prefix>: <message>"`` from the ``x-amzn-errortype`` header (or the body's
        ``__type``) and the body's ``message``, as the AWS SDK reports it to pi."""
        kind, message = bedrock_aws.error_fields(headers, body)
        if kind is None:
            return f"{status} {message or 'status code (no body)'}", None
        return f"{ERROR_PREFIXES.get(kind, kind)}: {message}", kind

    async def _read_events(
        self,
        response: httpx.Response | DirectResponse,
        parser: SseParser,
        send: EventSender,
        *,
        hooks: ProviderHooks | None = None,
    ) -> None:
        # Binary event-stream frames, not SSE: decoded by botocore, fed to the parser.
        assert isinstance(parser, BedrockParser)
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        if content_type != EVENT_STREAM:
            await send.send(
                parser.fail(
                    f"{response.status_code} Expected {EVENT_STREAM} but got "
                    f"{content_type or '(none)'}",
                    name="MalformedStream",
                )
            )
            return
        decoder = bedrock_aws.FrameDecoder()
        held: list[AssistantMessageEvent] = []
        chunks = response.aiter_bytes()
        try:
            async for chunk in chunks:
                try:
                    frames = decoder.feed(chunk)
                except bedrock_aws.FrameError as exc:
                    await send.send(
                        parser.fail(f"Malformed {API} stream: {exc}", name="MalformedStream")
                    )
                    return
                for frame in frames:
                    if frame.exception is not None:
                        events = parser.feed_exception(frame.exception, frame.payload)
                    else:
                        events = parser.feed(frame.event, frame.payload.decode("utf-8", "replace"))
                    if parser.finished and not isinstance(parser.final, StreamError):
                        held.extend(events)  # sent once the body has ended (see .http)
                        continue
                    await _send_all(send, events)
                    if isinstance(parser.final, StreamError):
                        return
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
        await _send_all(send, held + parser.end())
