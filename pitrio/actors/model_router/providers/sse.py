"""Server-sent events, sans-IO: the decoder (bytes in, events out) and the base of every
provider's stream parser (events in, assistant stream events out)."""

from __future__ import annotations

import abc
import codecs
import contextlib
from collections.abc import Callable
from itertools import repeat
from typing import Any

import orjson

from pitrio.actors.model_router.diagnostics import error_diagnostic
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.messages.agent import Diagnostic
from pitrio.messages.delta_run import StreamItem
from pitrio.messages.model import Model
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError


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
        return self._checked(self.on_event, event, data)

    def _checked(
        self, handler: Callable[..., list[AssistantMessageEvent]], *args: Any
    ) -> list[AssistantMessageEvent]:
        """``handler(*args)``'s events (a parser's handler of one event), a
        :class:`MalformedStreamError` as the stream's failure, the final event noted."""
        try:
            out = handler(*args)
        except MalformedStreamError as exc:
            out = [self.fail(f"Malformed {self.api_label} stream: {exc}", name="MalformedStream")]
        return self._track(out)

    def feed_all(
        self, decoded: list[tuple[str, str]]
    ) -> tuple[list[StreamItem], list[AssistantMessageEvent], int]:
        """:meth:`feed` of each of ``decoded`` in turn, stopping at the one that produced the
        final event: the events of those before it, that one's events (empty when none was
        final), and how many of ``decoded`` were fed. A parser may read a run of them at
        once, and hand consecutive deltas over as one :class:`DeltaRun` (expanded, the
        events are the same)."""
        read: list[StreamItem] = []
        for position, (event, data) in enumerate(decoded):
            events = self.feed(event, data)
            if self.final is not None:
                return read, events, position + 1
            read += events
        return read, [], len(decoded)

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
        if not self._data and not self._event and self._retry is None:
            # The usual read of a long stream: whole events of one ``data: `` line each, up
            # to the last blank line, cut by one split and checked by one count, both in C:
            # a line loop was ~1 us a delta (issue 38). Anything else is left to the line
            # rules below. The line the last read left unended starts this text (as the
            # line rules would join it).
            if self._partial:
                text, self._partial = self._partial + text, ""
            end = text.rfind("\n\n") + 2
            if end > 1 and text.startswith("data: "):
                found = text[6 : end - 2].split("\n\ndata: ")
                # Two line ends per event (the split's and the last blank line's): none in
                # a value, so each is an event of one data line.
                if text.count("\n", 0, end) == 2 * len(found):
                    out = list(zip(repeat("message"), found))
                    text = text[end:]
                    if not text:
                        return out
        lines = text.split("\n")
        if len(lines) == 1:
            self._partial += lines[0]
            return out
        lines[0] = self._partial + lines[0]
        self._partial = lines.pop()
        data = self._data
        for line in lines:
            # The usual lines without a call (issue 38): a data line, and the blank line
            # ending an event of data lines only.
            if line.startswith("data: "):
                data.append(line[6:])
            elif not line and data and not self._event and self._retry is None:
                out.append(("message", "\n".join(data)))
                data = self._data = []
            else:
                self._field(line, out)
                data = self._data
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


__all__ = ["MalformedStreamError", "SseDecoder", "SseParser"]
