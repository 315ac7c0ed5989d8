"""What the HTTP providers share: the connection pool, the request, the SSE transport.

A provider is two halves. The sans-IO half is a :class:`~.sse.SseParser` subclass (server-sent
events in, assistant stream events out, through a :class:`StreamBuilder`) plus a pure request
builder; both are tested without a network (the parser base and the SSE decoder live in
:mod:`.sse`, the error texts in :mod:`.http_errors`, the pool in :mod:`.http_pool`; all
re-exported here). The I/O half is :class:`HttpProvider.stream`: resolve the key, build the
request, POST it through the process-wide :class:`HttpPool`, feed the parser the events
:class:`SseDecoder` decodes, and turn every way a request can fail into the final ``error``
event (spec §1.3: a stream function never raises for request failures):

* a non-2xx answer: ``"<status> <vendor type>: <vendor message>"`` (``"<status> status code
  (no body)"`` when empty), with status and ``retry-after`` in the message's diagnostics;
* a host name that does not resolve: ``"cannot reach HOST: <cause>"`` at once, never
  repeated (issue 24: the repeats and the session's auto-retry made it 15 s of silence);
* no response at all (refused, reset or timed out before the response head), after the
  retries: pi's (the SDKs') ``"Connection error."`` / ``"Request timed out."``, the cause in
  the diagnostics when they are asked for;
* a connection failure after the response began (reset, closed mid-body):
  ``"Connection error: ..."``; a stream that stalled: ``"Request timed out ..."``;
* a stream that is not SSE, has bad JSON, or ends before its final event: an error naming the
  problem (``"... ended without ..."`` for the last, which the retry rules match).

Cancellation (an abort) is not converted: it propagates, the connection is closed, nothing more
is sent. The final event is held back until the response body has ended, so a caller that
stops reading at the final event (the agent loop cancels the stream then) does not cut a
connection that could go back to the pool.
"""

from __future__ import annotations

import abc
import random
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast

import attrs
import orjson
import trio

from pitrio.actors.model_router import provider_hooks
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.diagnostics import parse_retry_after
from pitrio.actors.model_router.providers import retry
from pitrio.actors.model_router.providers.base import EventSender, ProviderSettings
from pitrio.actors.model_router.providers.convert import body_bytes, encode_json_pieces
from pitrio.actors.model_router.providers.http_errors import (
    ErrorStyle,
    describe_error_body,
    describe_transport_error,
    http_error_message,
    stream_error_message,
    unresolved_host_message,
)
from pitrio.actors.model_router.providers.http_pool import HttpPool
from pitrio.actors.model_router.providers.sse import MalformedStreamError, SseDecoder, SseParser
from pitrio.errors import CredentialError
from pitrio.messages.delta_run import RunSender, StreamItem, expand_events, takes_runs
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamError
from pitrio.telemetry import note_transport_retry

if TYPE_CHECKING:
    import httpx

    from pitrio.actors.model_router.provider_hooks import ProviderHooks
    from pitrio.actors.model_router.providers.http11_wire import DirectResponse

# httpx (~35 ms to import) is imported by the first request, not at start-up: a process
# answers its first command sooner, and one that never calls an HTTP provider never pays it
# (issue 7, cold start). The functions below import it locally (a dict lookup once loaded).

_MAX_AFTER_FINAL = 64  # events read after the final one before giving up on draining
HANDOVER = 64
"""SSE events of one read parsed before their events are handed over (the agent loop's
channel holds 64: a read's first events can be taken while the next are parsed)."""


@attrs.frozen(kw_only=True)
class HttpRequest:
    """A provider request, fully built: where to POST what (headers include credentials)."""

    url: str
    headers: dict[str, str]
    body: bytes | tuple[bytes, ...]  # a long transcript's body in pieces, sent in order
    hooks: ProviderHooks | None = attrs.field(default=None, eq=False, repr=False)
    """Who hears of the answers (``after_provider_response``, ``provider_stream_event``)."""

    def content(self) -> bytes:
        """The body as one bytes."""
        return body_bytes(self.body)

    def json(self) -> Any:
        """The body decoded (for tests and debugging)."""
        return orjson.loads(self.content())


def bearer_json_request(
    url: str, body: Any, *, api_key: str | None, headers: Mapping[str, str]
) -> HttpRequest:
    """A JSON POST authorised by ``Authorization: Bearer`` (the OpenAI-style APIs); the
    configured ``headers`` (lower-cased) come last, so they may override."""
    request_headers = {"content-type": "application/json"}
    if api_key:
        request_headers["authorization"] = f"Bearer {api_key}"
    request_headers.update({name.lower(): value for name, value in headers.items()})
    return HttpRequest(url=url, headers=request_headers, body=encode_json_pieces(body))


def join_url(base_url: str, path: str) -> str:
    """``base_url`` and ``path`` joined by exactly one slash."""
    return base_url.rstrip("/") + "/" + path.lstrip("/")


# -- the transport ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RequestFailure:
    """A try that failed before anything streamed: its error text, what decides a repeat
    (status and headers of a response; neither for a failed connection), and the details of
    its diagnostic."""

    text: str
    status: int | None = None
    headers: dict[str, str] = attrs.field(factory=dict)
    diagnostic: dict[str, Any] = attrs.field(factory=dict)
    final: bool = False
    """Not worth repeating whatever the policy (a host name that does not resolve)."""
    body: bytes = b""
    """The error response's body as read (a provider may look into it, see Anthropic's
    thread rejections)."""


class HttpProvider(abc.ABC):
    """A provider reached over HTTP with an SSE response; :meth:`stream` is its StreamFn."""

    api_label = "provider"
    error_style: ErrorStyle = "openai"
    accept = "text/event-stream"
    """The ``accept`` header of every request (a non-SSE vendor names its own format)."""

    def __init__(
        self, pool: HttpPool, credentials: Credentials, settings: ProviderSettings | None = None
    ) -> None:
        self.pool = pool
        self.credentials = credentials
        self.settings = settings or ProviderSettings()
        self.random: Callable[[], float] = random.random  # the retry jitter; tests fix it

    @abc.abstractmethod
    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """The request for one response (pure)."""

    @abc.abstractmethod
    def new_parser(self, model: Model) -> SseParser:
        """A fresh parser for one response."""

    def describe_http_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> tuple[str, str | None]:
        """The error text and vendor error kind of a non-2xx answer (see :mod:`.http_errors`)."""
        return http_error_message(status, body, self.error_style)

    async def prepare(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> HttpRequest:
        """Resolve credentials and headers, then build the request.

        Raises :class:`CredentialError` when the key cannot be had.
        """
        bearer = None if options.api_key else self.credentials.bearer_token(model.provider)
        api_key = None
        if bearer is None:
            api_key = await self.credentials.api_key(model.provider, options.api_key)
        base_url = self.credentials.base_url(model.provider, model.base_url)
        if base_url != model.base_url:
            model = attrs.evolve(model, base_url=base_url)
        headers = await self.credentials.resolve_headers(
            model.headers, f"models.json providers.{model.provider}", model.provider
        )
        if bearer is not None:  # the token goes as itself, never as a key (x-api-key)
            headers = {"authorization": f"Bearer {bearer}", **headers}
        if model.provider == "github-copilot":
            # Imported here: the OAuth module (hashlib, secrets) was ~2 ms of every process's
            # first request, for Copilot's headers only (issue 38).
            from pitrio.actors.model_router.oauth import copilot_dynamic_headers

            headers.update(copilot_dynamic_headers(context.messages))
        return self.build_request(model, context, options, api_key=api_key, headers=headers)

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions, send: EventSender
    ) -> None:
        """Stream one response of ``model`` as events on ``send`` (a StreamFn)."""
        parser = self.new_parser(model)
        parser.redact = self.credentials.redact
        parser.diagnostics = self.settings.diagnostics
        try:
            request = await self.prepare(model, context, options)
        except CredentialError as exc:
            await send.send(parser.fail(str(exc), name="CredentialError"))
            return
        if options.hooks is not None:
            request = await self.apply_request_hooks(request, options.hooks)
        await self.send_request(request, parser, send)

    async def apply_request_hooks(self, request: HttpRequest, hooks: ProviderHooks) -> HttpRequest:
        """``before_provider_headers`` then ``before_provider_request``, once per request (a
        repeated try sends what they gave); the request carries ``hooks`` for its answers."""
        if hooks.wants(provider_hooks.HEADERS):
            headers: dict[str, str | None] = dict(request.headers)
            await hooks.headers(headers)
            request = attrs.evolve(request, headers=provider_hooks.applied_headers(headers))
        if hooks.wants(provider_hooks.PAYLOAD):
            # Handlers may change the payload in place or return another: sent either way.
            request = self.with_payload(request, await hooks.payload(request.json()))
        return attrs.evolve(request, hooks=hooks)

    def with_payload(self, request: HttpRequest, payload: Any) -> HttpRequest:
        """``request`` sending ``payload`` (a provider keeping the document elsewhere too
        overrides it)."""
        return attrs.evolve(request, body=provider_hooks.encoded_payload(payload))

    def retry_policy(self) -> retry.RetryPolicy:
        """How this provider repeats a failed try (the pool's settings; a vendor whose SDK pi
        runs without retries overrides it)."""
        return self.pool.settings.retry_policy()

    async def send_request(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> None:
        """POST ``request`` and stream the parsed answer (see :meth:`exchange`); a failure
        before anything streamed becomes the final error event."""
        failure = await self.exchange(request, parser, send)
        if failure is not None:
            await _send_all(send, [parser.fail(failure.text, **failure.diagnostic)])

    async def exchange(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> RequestFailure | None:
        """POST ``request`` and stream the parsed answer, repeating a try that failed before
        anything streamed as the vendor SDKs do (:mod:`.retry`); ``None`` once the outcome was
        sent, else the failure that ended the last try (not sent: the caller reports it or
        tries another request). The waits are plain trio sleeps: an abort cancels them."""
        policy: retry.RetryPolicy | None = None  # made at the first failure, not per request
        retries = 0
        while True:
            failure = await self._attempt(request, parser, send)
            if failure is None:
                return None
            if policy is None:
                policy = self.retry_policy()
            verdict = retry.decide(
                retries, policy, self.random, status=failure.status, headers=failure.headers
            )
            if isinstance(verdict, retry.Wait) and not failure.final:
                retries += 1
                note_transport_retry(self.api_label, failure.status)  # no event shows these
                await trio.sleep(verdict.seconds)
                continue
            if isinstance(verdict, retry.TooLong):
                failure = attrs.evolve(failure, text=f"{verdict.note} {failure.text}")
            return failure

    async def _attempt(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> RequestFailure | None:
        """One try: ``None`` when its outcome was sent, else the failure that ended it before
        anything streamed (the caller repeats it or reports it)."""
        settings = self.pool.settings
        # An empty ``accept`` sends none (pi's Bedrock client asks for nothing in particular).
        headers = {**request.headers, "accept": self.accept} if self.accept else request.headers
        direct = self.pool.direct()
        exchange: AbstractAsyncContextManager[httpx.Response | DirectResponse]
        if direct is not None:
            from pitrio.actors.model_router.providers.transport import Timeouts

            timeouts = Timeouts(
                connect=settings.connect_timeout,
                read=settings.read_timeout,
                write=settings.write_timeout,
                pool=settings.pool_timeout,
            )
            exchange = direct.stream("POST", request.url, headers, request.body, timeouts)
        else:
            exchange = self.pool.client.stream(
                "POST", request.url, headers=headers, content=request.content()
            )
        headed = False
        hooks = request.hooks
        try:
            async with exchange as response:
                headed = True
                if hooks is not None and hooks.wants(provider_hooks.RESPONSE):
                    await hooks.response(response.status_code, dict(response.headers.items()))
                if response.status_code >= 300:
                    body = await _read_limited(response, settings.max_error_body)
                    message, kind = self.describe_http_error(
                        response.status_code, dict(response.headers.items()), body
                    )
                    return RequestFailure(
                        text=message,
                        body=body,
                        status=response.status_code,
                        headers=dict(response.headers.items()),
                        diagnostic={
                            "name": "HttpError",
                            "status": response.status_code,
                            "code": kind,
                            "retry_after_ms": parse_retry_after(response.headers),
                        },
                    )
                await self._read_events(response, parser, send, hooks=hooks)
                return None
        except _transport_error() as caught:  # imports nothing: see the function
            import httpx

            exc = cast("httpx.TransportError", caught)

            if parser.finished:
                return None  # the body broke after the final event: the answer is complete
            name = "TimeoutError" if isinstance(exc, httpx.TimeoutException) else "ConnectionError"
            text = describe_transport_error(
                exc, streaming=parser.builder.started, read_timeout=settings.read_timeout
            )
            unreachable = unresolved_host_message(exc, request.url) if not headed else None
            if unreachable is not None:
                # The name does not resolve: a repeat a second later cannot do better, and
                # the SDKs' terse "Connection error." hides the cause (issue 24). The text
                # matches no auto-retry rule either, so the user hears it at once.
                return RequestFailure(
                    text=unreachable, diagnostic={"name": "ConnectionError"}, final=True
                )
            if not headed:
                # No response yet: the SDKs repeat a connection that failed or timed out, and
                # then say only which of the two it was (the cause goes to the diagnostics).
                timed_out = isinstance(exc, httpx.TimeoutException)
                return RequestFailure(
                    text="Request timed out." if timed_out else "Connection error.",
                    diagnostic={"name": name, "cause": text},
                )
            await _send_all(send, [parser.fail(text, name=name)])
            return None

    async def _read_events(
        self,
        response: httpx.Response | DirectResponse,
        parser: SseParser,
        send: EventSender,
        *,
        hooks: ProviderHooks | None = None,
    ) -> None:
        content_type = response.headers.get("content-type", "").partition(";")[0]
        if "text/event-stream" not in content_type:
            body = await _read_limited(response, self.pool.settings.max_error_body)
            kind, text = describe_error_body(body)
            content_type = response.headers.get("content-type", "(none)")
            message = f"{response.status_code} Expected an event stream but got {content_type}"
            if text:
                message += f": {text}"
            await send.send(parser.fail(message, name="MalformedStream", code=kind))
            return
        decoder = SseDecoder()
        chunks = response.aiter_bytes()
        observe = None
        if hooks is not None and hooks.wants(provider_hooks.STREAM_EVENT):
            observe = hooks
        model = parser.model
        # Runs of deltas go whole to a sender that takes them (the agent loop), expanded to
        # any other (issue 38).
        runs = takes_runs(send)
        try:
            async for chunk in chunks:
                decoded = decoder.feed(chunk)
                if observe is None:
                    # The events of one read handed over together (issue 38: a coroutine
                    # per SSE event cost more than the event); none waits for a later read.
                    # A long read (thousands of SSE events) goes a slice at a time, so its
                    # first events are not held while the rest is parsed (the first delta).
                    start = 0
                    while True:
                        part = decoded[start : start + HANDOVER]
                        read, last, fed = parser.feed_all(part)
                        start += fed
                        if parser.final is not None:
                            break
                        await _send_read(send, read, runs)
                        if start >= len(decoded):
                            break
                        if runs:
                            # A slice's runs are a few items in a channel that holds 64:
                            # without a full channel to stop it, the provider would parse the
                            # whole read before the loop, the pump and the writer see its
                            # first delta. Others run before the next slice, as a full channel
                            # of single deltas made them (issue 38: the first delta).
                            await trio.lowlevel.checkpoint()
                    if parser.final is None:
                        continue
                    await _send_read(send, read, runs)
                    if isinstance(parser.final, StreamError):
                        await _send_all(send, last)
                        return
                    await self._drain(chunks, decoder, len(decoded) - start)
                    await _send_all(send, last)
                    return
                for position, (event, data) in enumerate(decoded):
                    # Before the event is normalised (pi 1.6.0), and each event sent before
                    # the next one is shown to the hook.
                    await observe.stream_event(
                        model.provider, model.api, model.id, provider_hooks.event_data(data)
                    )
                    events = parser.feed(event, data)
                    if isinstance(parser.final, StreamError):
                        # A failure: stop reading; the connection is not worth keeping.
                        await _send_all(send, events)
                        return
                    if parser.finished:
                        # Held back until the body has ended (see the module docstring).
                        await self._drain(chunks, decoder, len(decoded) - position - 1)
                        await _send_all(send, events)
                        return
                    await _send_all(send, events)
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
        for event, data in decoder.end():
            await _send_all(send, parser.feed(event, data))
        await _send_all(send, parser.end())

    async def _drain(self, chunks: AsyncIterator[bytes], decoder: SseDecoder, seen: int) -> None:
        # Read what is left of the body (normally nothing but its end) for a short while, so
        # the connection returns to the pool; whatever happens, the answer is complete.
        with trio.move_on_after(self.pool.settings.drain_timeout):
            count = seen
            try:
                async for chunk in chunks:
                    count += len(decoder.feed(chunk))
                    if count > _MAX_AFTER_FINAL:
                        break
            except _transport_error():
                pass


class _NeverRaised(Exception):
    """Stands for httpx's exceptions while httpx is not loaded (none can have been raised)."""


def _transport_error() -> type[Exception]:
    """httpx's ``TransportError``, or a class nothing raises while httpx is not imported.

    An ``except`` clause's class is looked up only when an exception reaches it: a request
    that succeeds over the direct transport never loads httpx (issue 38: ~20 ms of the first
    answer), and an error of httpx's was raised by code that imported it first."""
    httpx = sys.modules.get("httpx")
    return _NeverRaised if httpx is None else cast("type[Exception]", httpx.TransportError)


async def _read_limited(response: httpx.Response | DirectResponse, limit: int) -> bytes:
    """Up to ``limit`` bytes of the body (an error page may be huge or endless)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except _transport_error():
        pass  # a truncated error body still says what it can
    return b"".join(chunks)[:limit]


async def _send_read(send: EventSender, items: list[StreamItem], runs: bool) -> None:
    """:func:`_send_all` for what a parser read, runs whole if ``runs`` (the sender takes
    them, see :func:`takes_runs`), else expanded into their events."""
    if not runs:
        await _send_all(send, expand_events(items))
        return
    sender = cast("RunSender", send)
    for item in items:
        try:
            sender.send_nowait(item)
        except trio.WouldBlock:
            await sender.send(item)


async def _send_all(send: EventSender, events: list[AssistantMessageEvent]) -> None:
    # Without a checkpoint per event while the channel has room: the next read from the
    # network checkpoints anyway, and a task switch per delta was a large part of a long
    # stream's cost (issue 7). A full channel still blocks (back-pressure).
    for event in events:
        try:
            send.send_nowait(event)
        except trio.WouldBlock:
            await send.send(event)


__all__ = [
    "ErrorStyle",
    "HttpPool",
    "HttpProvider",
    "HttpRequest",
    "MalformedStreamError",
    "RequestFailure",
    "SseDecoder",
    "SseParser",
    "describe_error_body",
    "http_error_message",
    "join_url",
    "stream_error_message",
]
