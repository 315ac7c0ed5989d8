"""The ``openai-codex-responses`` provider: the Responses API behind a ChatGPT subscription.

Facts from pi-ai's ``openai-codex-responses.js``. Request: ``POST {base}/codex/responses`` (the
base defaults to ``https://chatgpt.com/backend-api``; a base already ending in ``/codex`` or
``/codex/responses`` is kept), authorised by the ChatGPT OAuth access token as a bearer token
plus ``chatgpt-account-id`` (read from the token's JWT claim ``https://api.openai.com/auth``),
``originator: pi``, ``OpenAI-Beta: responses=experimental`` and, with a session,
``session-id``/``x-client-request-id``. The body is the Responses API's with Codex's fixed
fields (``instructions`` always, ``text.verbosity: low``, ``tool_choice: auto``,
``parallel_tool_calls``, tools with ``strict: null``).

The stream is the Responses API's, parsed by :class:`.OpenAIResponsesParser`
after Codex's own mapping: an ``error`` event fails as ``Codex error: <message>``,
``response.failed`` with its error's message, and ``response.done``/``response.incomplete``
complete the response like ``response.completed`` (an ``incomplete`` status is a length stop).
pi 1.6.0 repeats a failed try ``retry.provider.maxRetries`` times (none by default; 0.73.1
made three), one second doubling; here the transport's retry rules with those numbers. The
setting ``transport`` (pi's default ``auto``) sends requests over a WebSocket first, falling
back to SSE as pi does: see :mod:`.codex_websocket`.
"""

from __future__ import annotations

import base64
import platform
import ssl
import sys
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from pitrio.actors.model_router.providers import openai_responses
from pitrio.actors.model_router.providers.base import (
    EventSender,
    cache_session_id,
    output_limit,
)
from pitrio.actors.model_router.providers.codex_websocket import (
    CACHED_TRANSPORTS,
    CodexSockets,
    Continuation,
    Lease,
    WebSocketFailure,
    continued_body,
    handshake_headers,
    websocket_url,
)
from pitrio.actors.model_router.providers.convert import encode_json_pieces
from pitrio.actors.model_router.providers.http import (
    HttpPool,
    HttpProvider,
    HttpRequest,
    SseParser,
    join_url,
)
from pitrio.actors.model_router.providers.openai_responses_stream import OpenAIResponsesParser
from pitrio.actors.model_router.providers.retry import RetryPolicy
from pitrio.actors.model_router.providers.strict_tools import (
    compat_flag,
    responses_tools,
    supports_strict_mode,
)
from pitrio.actors.model_router.thinking import effective_thinking_level
from pitrio.errors import CredentialError
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone

API = "openai-codex-responses"
DEFAULT_BASE_URL = "https://chatgpt.com/backend-api"
JWT_CLAIM = "https://api.openai.com/auth"
NO_ACCOUNT = "Failed to extract accountId from token"
_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "i686": "ia32"}


def codex_url(base_url: str) -> str:
    """Where Codex requests go for ``base_url`` (see the module docstring)."""
    base = (base_url if base_url.strip() else DEFAULT_BASE_URL).rstrip("/")
    if base.endswith("/codex/responses"):
        return base
    if base.endswith("/codex"):
        return base + "/responses"
    return join_url(base, "codex/responses")


def account_id(token: str) -> str:
    """The ChatGPT account id in the access token's JWT payload.

    Raises :class:`CredentialError` with pi's text when the token has none.
    """
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError("not a JWT")
        payload = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        found = payload[JWT_CLAIM]["chatgpt_account_id"]
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise CredentialError(NO_ACCOUNT) from None
    if not isinstance(found, str) or not found:
        raise CredentialError(NO_ACCOUNT)
    return found


def user_agent() -> str:
    """pi's ``User-Agent``: ``pi (<platform> <release>; <arch>)`` in Node's names."""
    machine = platform.machine().lower()
    return f"pi ({sys.platform} {platform.release()}; {_ARCH.get(machine, machine)})"


MIN_OUTPUT_TOKENS = 16
"""The smallest ``max_output_tokens`` pi asks of the Responses API."""


def build_body(model: Model, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    """The JSON body of one streamed Codex request (pure; pi's key order).

    The system prompt is the first input item (``developer`` for a reasoning model, else
    ``system``), not ``instructions``: pi 1.6.0 moved it there because the backend appends
    ``instructions`` after the input, which kept the prompt out of the prompt cache.
    """
    items = openai_responses.build_input(model, context)
    if context.system_prompt:
        role = "developer" if model.reasoning else "system"
        items = [{"role": role, "content": context.system_prompt}, *items]
    body: dict[str, Any] = {
        "model": model.id,
        "store": False,
        "stream": True,
        "input": items,
        "text": {"verbosity": "low"},
        "include": ["reasoning.encrypted_content"],
    }
    session = cache_session_id(options)
    if session:
        body["prompt_cache_key"] = session
    body["tool_choice"] = "auto"
    body["parallel_tool_calls"] = True
    max_tokens = output_limit(model, options)
    if max_tokens and compat_flag(model, "supportsMaxOutputTokens"):
        body["max_output_tokens"] = max(max_tokens, MIN_OUTPUT_TOKENS)
    if context.tools:
        # Codex takes strict tools unless the model's compat says otherwise; others get null.
        supported = supports_strict_mode(model, True)
        body["tools"] = responses_tools(context.tools, supported, default=None)
    levels = model.thinking_level_map or {}
    # As pi 1.6.0: a level asked for is clamped to the model; none asked for is off as such.
    asked = model.reasoning and options.reasoning
    level = effective_thinking_level(model, options.reasoning) if asked else "off"
    if level != "off":
        # A level the map leaves out or maps to null is sent by its own name (pi's `??`).
        mapped = levels.get(level)
        body["reasoning"] = {"effort": level if mapped is None else mapped, "summary": "auto"}
    elif model.reasoning:
        # pi 1.6.0 sends off as effort "none" (so a switch to it keeps the prompt cache), the
        # model's own word for off where its map has one, and nothing where that is null.
        effort = levels.get("off", "none")
        if effort is not None:
            body["reasoning"] = {"effort": effort, "summary": "auto"}
    return body


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
) -> HttpRequest:
    """The HTTP request of one streamed response (pure but for the user agent).

    Raises :class:`CredentialError` when there is no token or it names no account.
    """
    if not api_key:
        raise CredentialError(f"No API key for provider: {model.provider}")
    request_headers = {name.lower(): value for name, value in headers.items()}
    # pi sets these after the configured headers: they cannot be overridden.
    request_headers.update(
        {
            "authorization": f"Bearer {api_key}",
            "chatgpt-account-id": account_id(api_key),
            "originator": "pi",
            "user-agent": user_agent(),
            "openai-beta": "responses=experimental",
            "accept": "text/event-stream",
            "content-type": "application/json",
        }
    )
    session = cache_session_id(options)
    if session:
        request_headers["session-id"] = session  # pi 1.6.0's name
        request_headers["x-client-request-id"] = session
    document = build_body(model, context, options)
    return CodexRequest(
        url=codex_url(model.base_url),
        headers=request_headers,
        body=encode_json_pieces(document),
        document=document,
        session_id=session,
    )


@attrs.frozen(kw_only=True)
class CodexRequest(HttpRequest):
    """A Codex request; the WebSocket transport sends ``document`` (the body unencoded) and
    keeps ``session_id``'s connection."""

    document: dict[str, Any] = attrs.field(factory=dict, eq=False)
    session_id: str | None = None


class CodexParser(OpenAIResponsesParser):
    """Codex's stream events mapped onto the Responses API parser (sans-IO)."""

    api_label = API

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event, after Codex's mapping (module docstring)."""
        payload = self.json(data, event)
        kind = payload.get("type") if isinstance(payload, dict) else None
        if not isinstance(payload, dict) or not isinstance(kind, str):
            return []  # pi skips events without a type
        if kind == "error":
            said = payload.get("message") or payload.get("code") or data
            code = payload.get("code")
            return [
                self.fail(
                    f"Codex error: {said}", name="StreamError", code=str(code) if code else None
                )
            ]
        response = payload.get("response")
        response = response if isinstance(response, dict) else {}
        if kind == "response.failed":
            error = response.get("error")
            error = error if isinstance(error, dict) else {}
            said = error.get("message") or "Codex response failed"
            code = error.get("code")
            out: list[AssistantMessageEvent] = []
            self.ensure_started(out)
            out.append(self.fail(str(said), name="StreamError", code=str(code) if code else None))
            return out
        if kind in ("response.done", "response.completed", "response.incomplete"):
            if response.get("status") == "incomplete":
                # pi maps the status "incomplete" to a length stop, whatever the reason.
                patched = {**response, "incomplete_details": {"reason": "max_output_tokens"}}
                return super().on_event(
                    event,
                    orjson.dumps({"type": "response.incomplete", "response": patched}).decode(),
                )
            mapped = {**payload, "type": "response.completed"}
            return super().on_event(event, orjson.dumps(mapped).decode())
        return super().on_event(event, data)


class OpenAICodexResponsesProvider(HttpProvider):
    """The ``openai-codex-responses`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    error_style = "codex"

    def __init__(self, pool: HttpPool, *args: Any, **kwargs: Any) -> None:
        super().__init__(pool, *args, **kwargs)
        self.sockets = CodexSockets()
        pool.closers.append(self.sockets.aclose)  # the router's pool closes the sessions'
        self._ssl: ssl.SSLContext | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        # Built once, on the first wss connection (as the HTTP pool's: tens of milliseconds).
        if self._ssl is None:
            import httpx

            self._ssl = httpx.create_ssl_context(trust_env=self.pool.settings.trust_env)
        return self._ssl

    def with_payload(self, request: HttpRequest, payload: Any) -> HttpRequest:
        """The base's, and the WebSocket's ``document`` too."""
        changed = super().with_payload(request, payload)
        if isinstance(changed, CodexRequest) and isinstance(payload, dict):
            changed = attrs.evolve(changed, document=payload)
        return changed

    async def send_request(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> None:
        """Over a WebSocket first unless ``transport`` is ``sse`` or the session fell back;
        over SSE (the base's) after a WebSocket failure before the first event."""
        if (
            isinstance(request, CodexRequest)
            and self.settings.transport != "sse"
            and request.session_id not in self.sockets.sse_sessions
            and await self._over_websocket(request, parser, send)
        ):
            return
        await super().send_request(request, parser, send)

    async def _over_websocket(
        self, request: CodexRequest, parser: SseParser, send: EventSender
    ) -> bool:
        """``True`` once the answer (or its failure) was sent; ``False``: fall back to SSE."""
        settings, session = self.pool.settings, request.session_id
        url, headers = websocket_url(request.url), handshake_headers(request.headers, session)

        def connect() -> Any:
            # wsproto comes with the first WebSocket request (start-up stays lighter).
            from pitrio.actors.model_router.providers.codex_socket import WsprotoSocket

            return WsprotoSocket.connect(
                url,
                headers,
                connect_timeout=settings.websocket_connect_timeout,
                ssl_context=self._ssl_context,
            )

        try:
            lease = await self.sockets.acquire(session, connect)
        except WebSocketFailure:
            self._fall_back(session)
            return False
        try:
            await self._exchange(request, lease, parser, send)
        except WebSocketFailure as exc:
            lease.socket.continuation = None
            self._fall_back(session)
            if not parser.builder.started:
                return False
            await send.send(parser.fail(str(exc), name="ConnectionError"))
        finally:
            done = isinstance(parser.final, StreamDone)
            await self.sockets.release(session, lease, keep=done)
        return True

    async def _exchange(
        self, request: CodexRequest, lease: Lease, parser: SseParser, send: EventSender
    ) -> None:
        socket, body = lease.socket, request.document
        cached = lease.kept and self.settings.transport in CACHED_TRANSPORTS
        sent = body
        if cached and socket.continuation is not None:
            sent = continued_body(body, socket.continuation) or body
        socket.continuation = None  # until this answer completes
        await socket.send_text(orjson.dumps({"type": "response.create", **sent}).decode())
        while not parser.finished:
            text = await socket.receive_text(self.pool.settings.read_timeout)
            if not text:
                continue  # pi skips an empty message
            try:
                orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                await send.send(parser.fail(f"Invalid Codex WebSocket JSON: {exc}",
                                            name="MalformedStream"))  # fmt: skip
                return
            for event in parser.feed("message", text):
                await send.send(event)
        final = parser.final
        if cached and isinstance(final, StreamDone) and final.message.response_id:
            answer = LlmContext(system_prompt="", messages=(final.message,))
            items = openai_responses.build_input(parser.model, answer)
            socket.continuation = Continuation(
                body=body,
                response_id=final.message.response_id,
                # pi leaves out the results the preparer owes an answer's calls.
                items=tuple(item for item in items if item.get("type") != "function_call_output"),
            )

    def _fall_back(self, session: str | None) -> None:
        if session is not None:  # pi remembers only sessions; a request without goes on trying
            self.sockets.sse_sessions.add(session)

    def retry_policy(self) -> RetryPolicy:
        """pi's Codex repeats: ``retry.provider.maxRetries`` of them (none by default in pi
        1.6.0; 0.73.1 made three), after 1 s doubling, no jitter."""
        settings = self.pool.settings
        return RetryPolicy(
            max_retries=settings.max_retries,
            initial_delay=1.0,
            max_delay=settings.max_retry_backoff,
            jitter=0.0,
            max_retry_delay_ms=settings.max_retry_delay_ms,
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
        """See :func:`build_request`."""
        return build_request(model, context, options, api_key=api_key, headers=headers)

    def new_parser(self, model: Model) -> CodexParser:
        """A parser for one response of ``model``."""
        return CodexParser(model)


__all__ = [
    "API",
    "CodexParser",
    "OpenAICodexResponsesProvider",
    "account_id",
    "build_body",
    "build_request",
    "codex_url",
]
