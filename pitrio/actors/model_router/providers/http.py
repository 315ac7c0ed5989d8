"""What the HTTP providers share: the connection pool, the SSE transport, error texts.

A provider is two halves. The sans-IO half is a :class:`SseParser` subclass (server-sent events
in, assistant stream events out, through a :class:`StreamBuilder`) plus a pure request builder;
both are tested without a network. The I/O half is :class:`HttpProvider.stream`: resolve the
key, build the request, POST it through the process-wide :class:`HttpPool`, feed the parser
the events :class:`SseDecoder` decodes, and turn every way a request can fail into the final
``error`` event (spec §1.3: a stream function never raises for request failures):

* a non-2xx answer: ``"<status> <vendor type>: <vendor message>"`` (``"<status> status code
  (no body)"`` when empty), with status and ``retry-after`` in the message's diagnostics;
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
import codecs
import contextlib
import os
import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal

import attrs
import orjson
import trio

from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.diagnostics import error_diagnostic, parse_retry_after
from pitrio.actors.model_router.providers import retry
from pitrio.actors.model_router.providers.base import EventSender, HttpSettings, ProviderSettings
from pitrio.actors.model_router.providers.convert import body_bytes, encode_json_pieces
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.errors import CredentialError
from pitrio.messages.agent import Diagnostic
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError

if TYPE_CHECKING:
    import httpx

    from pitrio.actors.model_router.providers.transport import DirectResponse, Http11Transport

# httpx (~35 ms to import) is imported by the first request, not at start-up: a process
# answers its first command sooner, and one that never calls an HTTP provider never pays it
# (issue 7, cold start). The functions below import it locally (a dict lookup once loaded).

_MAX_TEXT = 2000  # characters of a non-JSON error body kept in the message
_MAX_AFTER_FINAL = 64  # events read after the final one before giving up on draining


class HttpPool:
    """The process's one HTTP client: every provider and session shares its connections.

    Owned by the ModelRouter, which closes it when it stops.
    """

    def __init__(self, settings: HttpSettings | None = None) -> None:
        self.settings = settings or HttpSettings()
        self._client: httpx.AsyncClient | None = None
        self._transport: Http11Transport | None = None
        self._direct: bool | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared client, created on first use (building its TLS context costs tens of
        milliseconds, which a process that never calls a real provider should not pay)."""
        if self._client is None:
            self._client = self._new_client()
        return self._client

    @property
    def transport(self) -> Http11Transport:
        """The connection pool under the client (and under :meth:`direct`)."""
        if self._transport is None:
            import httpx

            from pitrio.actors.model_router.providers.transport import Http11Transport

            settings = self.settings
            self._transport = Http11Transport(
                max_connections=settings.max_connections,
                max_keepalive=settings.max_keepalive,
                ssl_context=lambda: httpx.create_ssl_context(trust_env=settings.trust_env),
            )
        return self._transport

    def direct(self) -> Http11Transport | None:
        """The transport to use without the client, unless the environment names a proxy
        (then every request goes through httpx, which routes it). Per request the client's
        layers cost about as much CPU as the transport itself (issue 7)."""
        if self._direct is None:
            names = {"http_proxy", "https_proxy", "all_proxy"}
            self._direct = not (
                self.settings.trust_env
                and any(key.lower() in names and value for key, value in os.environ.items())
            )
        return self.transport if self._direct else None

    def _new_client(self) -> httpx.AsyncClient:
        import httpx

        settings = self.settings
        return httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=settings.connect_timeout,
                read=settings.read_timeout,
                write=settings.write_timeout,
                pool=settings.pool_timeout,
            ),
            limits=httpx.Limits(
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_keepalive,
            ),
            trust_env=settings.trust_env,
            follow_redirects=False,
            # Direct connections through pitrio's lean HTTP/1.1 transport (half the CPU per
            # request of httpcore + h11, issue 7); proxies from the environment still get
            # httpx's own transports (it mounts them for the URLs they cover).
            transport=self.transport,
        )

    async def aclose(self) -> None:
        """Close every pooled connection (the pool can be used again afterwards)."""
        client, self._client = self._client, None
        transport, self._transport = self._transport, None
        if client is not None:
            await client.aclose()  # closes the transport too
        elif transport is not None:
            await transport.aclose()


@attrs.frozen(kw_only=True)
class HttpRequest:
    """A provider request, fully built: where to POST what (headers include credentials)."""

    url: str
    headers: dict[str, str]
    body: bytes | tuple[bytes, ...]  # a long transcript's body in pieces, sent in order

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


# -- error texts -----------------------------------------------------------------------------


def _vendor_error(document: Any) -> tuple[str | None, str | None]:
    """(kind, message) from the usual vendor error shapes; (None, None) if none matches."""
    if isinstance(document, list) and document:
        return _vendor_error(document[0])  # Google's OpenAI endpoint wraps it in a list
    if not isinstance(document, dict):
        return None, None
    error = document.get("error", document)
    if isinstance(error, str):
        return None, error
    if not isinstance(error, dict):
        return None, None
    message = error.get("message") or error.get("detail") or document.get("message")
    if not isinstance(message, str):
        message = None
    kind: Any = None
    for key in ("type", "code", "status"):
        value = error.get(key)
        if value is not None and value != "error" and value != "":
            kind = str(value)
            break
    metadata = error.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str) and message:
        # OpenRouter puts the upstream vendor's own text here; overflow patterns need it.
        message = f"{message} ({metadata['raw']})"
    return kind, message


def describe_error_body(body: bytes) -> tuple[str | None, str]:
    """(vendor error type, vendor text) of an error body; the text is ``""`` when empty."""
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return None, ""
    try:
        kind, message = _vendor_error(orjson.loads(body))
    except orjson.JSONDecodeError:
        kind, message = None, None
    if message is None:
        return kind, text[:_MAX_TEXT]
    return kind, message


ErrorStyle = Literal["openai", "openai-completions", "anthropic"]
"""Whose SDK's error texts a provider reproduces: pi's providers show the SDK's message as is
(OpenAI's reads the body's ``error`` member, Anthropic's the whole body; pi's completions
provider appends an OpenRouter ``metadata.raw`` on a line of its own)."""


def _js_truthy(value: Any) -> bool:
    # JavaScript's truthiness, which the SDKs' checks use: objects and arrays are always true.
    if isinstance(value, dict | list):
        return True
    return bool(value)


def _js_json(value: Any) -> str:
    """``JSON.stringify``'s compact form."""
    return orjson.dumps(value).decode()


def _sdk_text(error: Any, fallback: str | None) -> str | None:
    """The text the SDKs' ``APIError`` builds from a parsed error: its string ``message``, a
    non-string one as JSON, else the whole error as JSON, else ``fallback``."""
    message = error.get("message") if isinstance(error, dict) else None
    if _js_truthy(message):
        return message if isinstance(message, str) else _js_json(message)
    if _js_truthy(error):
        return _js_json(error)
    return fallback


def _raw_metadata(error: Any) -> str | None:
    metadata = error.get("metadata") if isinstance(error, dict) else None
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if not _js_truthy(raw):
        return None
    return raw if isinstance(raw, str) else _js_json(raw)


def _parse_json(body: bytes) -> tuple[bool, Any]:
    try:
        return True, orjson.loads(body)
    except orjson.JSONDecodeError:
        return False, None


def http_error_message(
    status: int, body: bytes, style: ErrorStyle = "openai"
) -> tuple[str, str | None]:
    """The ``errorMessage`` of a non-2xx answer, as pi shows it (the SDK's text), and the
    vendor's error type if it gave one (for diagnostics).

    OpenAI-style: ``"<status> <error.message>"``; Anthropic-style: ``"<status> <the body as
    JSON>"`` (its SDK finds no top-level message); a body that is not JSON: ``"<status>
    <text>"``; nothing usable: ``"<status> status code (no body)"``.
    """
    kind, _ = _vendor_error(_parse_json(body)[1])
    text = body.decode("utf-8", errors="replace")
    parsed_ok, parsed = _parse_json(body)
    fallback = None if parsed_ok and _js_truthy(parsed) else text
    if style == "anthropic":
        error = parsed if parsed_ok else None
    else:
        error = parsed.get("error") if isinstance(parsed, dict) else None
    message = _sdk_text(error, fallback)
    result = f"{status} {message}" if message else f"{status} status code (no body)"
    raw = _raw_metadata(error) if style == "openai-completions" else None
    if raw:
        result += "\n" + raw
    return result, kind


def stream_error_message(document: Any, style: ErrorStyle = "openai") -> tuple[str, str | None]:
    """The ``errorMessage`` of an error event inside a stream (no HTTP status there): the
    SDK's text of the event's ``error`` member (OpenAI) or of the whole event (Anthropic)."""
    kind, _ = _vendor_error(document)
    error = (
        document
        if style == "anthropic"
        else (document.get("error") if isinstance(document, dict) else None)
    )
    message = _sdk_text(error, None) or "(no status code or body)"
    raw = _raw_metadata(error) if style == "openai-completions" else None
    if raw:
        message += "\n" + raw
    return message, kind


def _describe_transport_error(
    exc: httpx.TransportError, *, streaming: bool = False, read_timeout: float | None = None
) -> str:
    """The error text of a failed request. A read timeout (the one limit on silence: before
    the first byte and between two reads alike) says which it was: no response at all, or a
    stream that had started and then stalled (``streaming``)."""
    import httpx

    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        phase = {
            httpx.ConnectTimeout: "while connecting",
            httpx.ReadTimeout: "waiting for the provider",
            httpx.WriteTimeout: "while sending the request",
            httpx.PoolTimeout: "waiting for a free connection",
        }.get(type(exc), "")
        message = f"Request timed out {phase}".rstrip()
        if isinstance(exc, httpx.ReadTimeout) and read_timeout is not None:
            quiet = f"{read_timeout:g} s"
            what = f"the stream stalled for {quiet}" if streaming else f"no response in {quiet}"
            message = f"{message}: {what}"
        return message
    return f"Connection error: {text}"


# -- parsing ---------------------------------------------------------------------------------


class MalformedStreamError(Exception):
    """Raised inside a parser for input it cannot make sense of; becomes an error event."""


class SseParser(abc.ABC):
    """Sans-IO base of a provider's stream parser: SSE events in, stream events out.

    Subclasses implement :meth:`on_event` (one decoded SSE event) and :meth:`on_end` (the
    body ended; return the final events, or raise :class:`MalformedStreamError` if the
    stream was cut short). They emit through :attr:`builder`; ``start`` is sent before the
    first content. Once a final event (done/error) was produced, later input is ignored.
    """

    api_label = "provider"

    def __init__(self, model: Model, redact: Callable[[str], str] | None = None) -> None:
        self.model = model
        self.builder = StreamBuilder.for_model(model)
        self.final: StreamDone | StreamError | None = None
        # Error texts come from the vendor and may echo a key back: scrubbed at the source.
        self.redact: Callable[[str], str] = redact or (lambda text: text)
        self.diagnostics = False
        """Whether a failure carries a ``diagnostics`` entry (pi's messages carry none)."""

    @property
    def finished(self) -> bool:
        """Whether the final event has been produced."""
        return self.final is not None

    def feed(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event (``event`` is ``"message"`` when unnamed)."""
        if self.final is not None:
            return []
        try:
            out = self.on_event(event, data)
        except MalformedStreamError as exc:
            out = [self.fail(f"Malformed {self.api_label} stream: {exc}", name="MalformedStream")]
        return self._track(out)

    def end(self) -> list[AssistantMessageEvent]:
        """Events at the end of the body: the final event if the stream did not send one."""
        if self.final is not None:
            return []
        try:
            out = self.on_end()
        except MalformedStreamError as exc:
            out = [self.fail(f"The {self.api_label} stream {exc}", name="MalformedStream")]
        return self._track(out)

    def fail(
        self,
        message: str,
        *,
        name: str,
        status: int | None = None,
        code: str | None = None,
        retry_after_ms: int | None = None,
        cause: str | None = None,
    ) -> StreamError:
        """The final error event: the content so far, ``message``, and its diagnostic when
        :attr:`diagnostics` asks for one."""
        message = self.redact(message)
        diagnostics: tuple[Diagnostic, ...] | None = None
        if self.diagnostics:
            diagnostics = (
                error_diagnostic(
                    message,
                    name=name,
                    status=status,
                    code=code,
                    retry_after_ms=retry_after_ms,
                    cause=None if cause is None else self.redact(cause),
                ),
            )
        error = self.builder.error("error", message, diagnostics=diagnostics)
        self.final = error
        return error

    def json(self, data: str, event: str) -> Any:
        """``data`` parsed as JSON; :class:`MalformedStreamError` naming the event if it is not."""
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            snippet = data[:80] + ("..." if len(data) > 80 else "")
            raise MalformedStreamError(f"invalid JSON in a {event!r} event: {snippet!r}") from None

    def ensure_started(self, out: list[AssistantMessageEvent]) -> None:
        """Append ``start`` to ``out`` unless the stream has started already."""
        if not self.builder.started:
            out.append(self.builder.start())

    def close_open_blocks(self, out: list[AssistantMessageEvent]) -> None:
        """Close every block still streaming, in content order (the end of a response)."""
        for index in sorted(self.builder.open_indexes):
            out.append(self.close_block(index))

    @abc.abstractmethod
    def close_block(self, index: int) -> AssistantMessageEvent:
        """The end event of the open block at ``index`` (with its signature, if any)."""

    @abc.abstractmethod
    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event."""

    @abc.abstractmethod
    def on_end(self) -> list[AssistantMessageEvent]:
        """Final events at the end of the body."""

    def _track(self, out: list[AssistantMessageEvent]) -> list[AssistantMessageEvent]:
        for event in out:
            if isinstance(event, StreamDone | StreamError):
                self.final = event
        return out


# -- the transport ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Failure:
    """A try that failed before anything streamed: its error text, what decides a repeat
    (status and headers of a response; neither for a failed connection), and the details of
    its diagnostic."""

    text: str
    status: int | None = None
    headers: dict[str, str] = attrs.field(factory=dict)
    diagnostic: dict[str, Any] = attrs.field(factory=dict)


class HttpProvider(abc.ABC):
    """A provider reached over HTTP with an SSE response; :meth:`stream` is its StreamFn."""

    api_label = "provider"
    error_style: ErrorStyle = "openai"

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

    async def prepare(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> HttpRequest:
        """Resolve credentials and headers, then build the request.

        Raises :class:`CredentialError` when the key cannot be had.
        """
        api_key = await self.credentials.api_key(model.provider, options.api_key)
        headers = await self.credentials.resolve_headers(
            model.headers, f"models.json providers.{model.provider}"
        )
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
        await self.send_request(request, parser, send)

    async def send_request(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> None:
        """POST ``request`` and stream the parsed answer, repeating a try that failed before
        anything streamed as the vendor SDKs do (:mod:`.retry`). The waits are plain trio
        sleeps: an abort cancels them at once."""
        policy = self.pool.settings.retry_policy()
        retries = 0
        while True:
            failure = await self._attempt(request, parser, send)
            if failure is None:
                return
            verdict = retry.decide(
                retries, policy, self.random, status=failure.status, headers=failure.headers
            )
            if isinstance(verdict, retry.Wait):
                retries += 1
                await trio.sleep(verdict.seconds)
                continue
            text = failure.text
            if isinstance(verdict, retry.TooLong):
                text = f"{text} ({verdict.note})"
            await _send_all(send, [parser.fail(text, **failure.diagnostic)])
            return

    async def _attempt(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> _Failure | None:
        """One try: ``None`` when its outcome was sent, else the failure that ended it before
        anything streamed (the caller repeats it or reports it)."""
        import httpx

        settings = self.pool.settings
        headers = {**request.headers, "accept": "text/event-stream"}
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
        try:
            async with exchange as response:
                headed = True
                if response.status_code >= 300:
                    body = await _read_limited(response, settings.max_error_body)
                    message, kind = http_error_message(response.status_code, body, self.error_style)
                    return _Failure(
                        text=message,
                        status=response.status_code,
                        headers=dict(response.headers.items()),
                        diagnostic={
                            "name": "HttpError",
                            "status": response.status_code,
                            "code": kind,
                            "retry_after_ms": parse_retry_after(response.headers),
                        },
                    )
                await self._read_events(response, parser, send)
                return None
        except httpx.TransportError as exc:
            if parser.finished:
                return None  # the body broke after the final event: the answer is complete
            name = "TimeoutError" if isinstance(exc, httpx.TimeoutException) else "ConnectionError"
            text = _describe_transport_error(
                exc, streaming=parser.builder.started, read_timeout=settings.read_timeout
            )
            if not headed:
                # No response yet: the SDKs repeat a connection that failed or timed out, and
                # then say only which of the two it was (the cause goes to the diagnostics).
                timed_out = isinstance(exc, httpx.TimeoutException)
                return _Failure(
                    text="Request timed out." if timed_out else "Connection error.",
                    diagnostic={"name": name, "cause": text},
                )
            await _send_all(send, [parser.fail(text, name=name)])
            return None

    async def _read_events(
        self, response: httpx.Response | DirectResponse, parser: SseParser, send: EventSender
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
        try:
            async for chunk in chunks:
                decoded = decoder.feed(chunk)
                for position, (event, data) in enumerate(decoded):
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
        import httpx

        with trio.move_on_after(self.pool.settings.drain_timeout):
            count = seen
            try:
                async for chunk in chunks:
                    count += len(decoder.feed(chunk))
                    if count > _MAX_AFTER_FINAL:
                        break
            except httpx.TransportError:
                pass


class SseDecoder:
    """Server-sent events from a body's bytes, by the SSE spec's rules (sans-IO).

    UTF-8 (undecodable bytes replaced), lines ended by CRLF, CR or LF, ``event``/``data``/
    ``id``/``retry`` fields, comments, an event per blank line; what httpx-sse does, without
    its five layers of async generators per chunk (issue 7: per-delta cost of a stream).
    An unnamed event is ``"message"``.
    """

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""  # an unterminated line
        self._cr = False  # the text so far ended with CR: an LF next is the same line end
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """The events completed by ``chunk`` as ``(event, data)``."""
        return self._lines(self._text.decode(chunk))

    def end(self) -> list[tuple[str, str]]:
        """The body ended: an unterminated last line counts (no event without a blank line)."""
        text = self._text.decode(b"", final=True)
        out = self._lines(text)
        if self._partial:
            line, self._partial = self._partial, ""
            self._field(line, out)
        return out

    def _lines(self, text: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if not text:
            return out
        if self._cr:
            self._cr = False
            if text[0] == "\n":
                text = text[1:]  # the LF of a CRLF split across chunks
        trailing_cr = text.endswith("\r")
        if trailing_cr:
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if trailing_cr:
            # A line end now; an LF starting the next chunk belongs to it (CRLF).
            self._cr = True
            text += "\n"
        lines = text.split("\n")
        if len(lines) == 1:
            self._partial += lines[0]
            return out
        lines[0] = self._partial + lines[0]
        self._partial = lines.pop()
        for line in lines:
            self._field(line, out)
        return out

    def _field(self, line: str, out: list[tuple[str, str]]) -> None:
        if not line:
            if self._event or self._data or self._id or self._retry is not None:
                out.append((self._event or "message", "\n".join(self._data)))
                self._event, self._data, self._retry = "", [], None  # the id stays (SSE)
            return
        if line[0] == ":":
            return
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)


async def _read_limited(response: httpx.Response | DirectResponse, limit: int) -> bytes:
    """Up to ``limit`` bytes of the body (an error page may be huge or endless)."""
    import httpx

    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except httpx.TransportError:
        pass  # a truncated error body still says what it can
    return b"".join(chunks)[:limit]


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
    "HttpPool",
    "HttpProvider",
    "HttpRequest",
    "MalformedStreamError",
    "SseParser",
    "describe_error_body",
    "http_error_message",
    "join_url",
    "stream_error_message",
]
