"""The OpenTelemetry shell: carries out the mapper's operations on spans and instruments.

:class:`Telemetry` holds a tracer and a meter (from the providers it is given, else the global
ones) and the instruments of :data:`~pitrio.telemetry.mapper.INSTRUMENTS`.
:meth:`Telemetry.observe` subscribes to one session's events and runs a
:class:`SessionObserver` in the session's nursery: it feeds each event to a
:class:`~pitrio.telemetry.mapper.RunMapper` and applies what comes back. Spans are started with
an explicit parent context (the span of the parent key), never the task's current context, so
nothing leaks between trio tasks; the observer's own task is the only one touching its spans.

The daemon's gauges (:meth:`Telemetry.watch_daemon`) are observable: the SDK's reader calls
them from its own thread, and they ask the trio loop for the figures through
:func:`trio.from_thread.run`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

import trio
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import Span, Status, StatusCode

from pitrio.actors.session.fanout import Sequenced
from pitrio.telemetry.log_context import forget, remember
from pitrio.telemetry.mapper import (
    INSTRUMENTS,
    SECONDS_BUCKETS,
    AddEvent,
    EndSpan,
    Measure,
    Operation,
    RunMapper,
    StartSpan,
)

EVENT_CAPACITY = 4096
"""The observer's event subscription: events it may lag behind before the session coalesces
deltas for it and, further behind, drops it (its open spans are then ended as failed)."""

SCOPE = "pitrio"
"""The instrumentation scope of every span and instrument."""

DaemonCounts = Callable[[], Awaitable[tuple[Mapping[str, int], Mapping[str, int]]]]
"""Read in the trio loop: (sessions by status, open connections by endpoint)."""


class Subscribable(Protocol):
    """What the observer needs of a session handle (:class:`SessionHandle` has it); a protocol
    keeps the session package out of this module's imports."""

    async def subscribe_into(self, send: trio.MemorySendChannel[Sequenced], capacity: int) -> None:
        """Deliver every event from now on into ``send``."""


class Telemetry:
    """Where a process's sessions send their spans and metrics.

    Given no providers it uses the global ones (:func:`opentelemetry.trace.set_tracer_provider`);
    tests and embedding programs pass their own.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        from pitrio.telemetry._meta import version

        tracers = tracer_provider or trace.get_tracer_provider()
        meters = meter_provider or metrics.get_meter_provider()
        self.tracer = tracers.get_tracer(SCOPE, version())
        self.meter = meters.get_meter(SCOPE, version())
        self._counters: dict[str, metrics.Counter] = {}
        self._histograms: dict[str, metrics.Histogram] = {}
        for spec in INSTRUMENTS:
            if spec.kind == "counter":
                self._counters[spec.name] = self.meter.create_counter(
                    spec.name, unit=spec.unit, description=spec.description
                )
            else:
                self._histograms[spec.name] = self.meter.create_histogram(
                    spec.name,
                    unit=spec.unit,
                    description=spec.description,
                    explicit_bucket_boundaries_advisory=list(SECONDS_BUCKETS),
                )
        self._daemon: tuple[DaemonCounts, trio.lowlevel.TrioToken] | None = None
        self.meter.create_observable_gauge(
            "pitrio.daemon.sessions",
            callbacks=[self._observe_sessions],
            unit="{session}",
            description="Sessions known to the daemon, by status.",
        )
        self.meter.create_observable_gauge(
            "pitrio.daemon.connections",
            callbacks=[self._observe_connections],
            unit="{connection}",
            description="Open websocket connections, by endpoint.",
        )

    async def observe(self, nursery: trio.Nursery, session: Subscribable, session_id: str) -> None:
        """Trace the session of ``session`` until it ends; the observer's task goes into
        ``nursery`` (the session's own)."""
        send, receive = trio.open_memory_channel[Sequenced](EVENT_CAPACITY)
        await session.subscribe_into(send, EVENT_CAPACITY)
        nursery.start_soon(SessionObserver(self, session_id).run, receive)

    def measure(self, op: Measure) -> None:
        """Carry out one metric operation."""
        counter = self._counters.get(op.instrument)
        if counter is not None:
            counter.add(op.value, op.attributes)
        else:
            self._histograms[op.instrument].record(op.value, op.attributes)

    def transport_retry(self, api: str, status: int | None) -> None:
        """Count one provider-level retry (:func:`pitrio.telemetry.note_transport_retry`)."""
        self._counters["pitrio.llm.transport_retries"].add(
            1, {"pitrio.llm.api": api, "http.response.status_code": status or 0}
        )

    # -- the daemon's gauges ---------------------------------------------------------------

    def watch_daemon(self, counts: DaemonCounts | None) -> None:
        """Report the daemon's figures from now on (``None``: stop); call it in the trio loop
        that ``counts`` runs in."""
        self._daemon = None if counts is None else (counts, trio.lowlevel.current_trio_token())

    def _read_daemon(self) -> tuple[Mapping[str, int], Mapping[str, int]] | None:
        daemon = self._daemon
        if daemon is None:
            return None
        counts, token = daemon
        try:
            return trio.from_thread.run(counts, trio_token=token)
        except (trio.RunFinishedError, trio.Cancelled, RuntimeError):
            # The loop has ended, or the reader was asked from the loop's own thread (a
            # collection while trio runs there): no figures this time rather than a deadlock.
            return None

    def _observe_sessions(self, _options: CallbackOptions) -> Iterable[Observation]:
        figures = self._read_daemon()
        if figures is None:
            return []
        return [Observation(n, {"status": status}) for status, n in sorted(figures[0].items())]

    def _observe_connections(self, _options: CallbackOptions) -> Iterable[Observation]:
        figures = self._read_daemon()
        if figures is None:
            return []
        return [Observation(n, {"endpoint": name}) for name, n in sorted(figures[1].items())]


class SessionObserver:
    """One session's spans: the mapper's state and the spans it keeps open."""

    def __init__(self, telemetry: Telemetry, session_id: str) -> None:
        self.telemetry = telemetry
        self.session_id = session_id
        self.mapper = RunMapper(session_id)
        self.spans: dict[str, Span] = {}

    async def run(self, events: trio.MemoryReceiveChannel[Sequenced]) -> None:
        """Map every event until the stream ends; then end what is still open."""
        reason = "event stream ended"  # the session ended, or dropped this observer
        try:
            async for item in events:
                self.feed(item, time.time_ns())
        except trio.Cancelled:
            reason = "session closed"
            raise
        finally:
            now = time.time_ns()
            while True:  # events delivered before a cancellation are still mapped
                try:
                    self.feed(events.receive_nowait(), now)
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
            self.apply(self.mapper.close(now, reason))
            forget(self.session_id)

    def feed(self, item: Sequenced, now_ns: int) -> None:
        """Map one delivered event."""
        ops = self.mapper.feed(item.event, now_ns)
        if ops:
            self.apply(ops)

    def apply(self, ops: list[Operation]) -> None:
        """Carry out ``ops`` on spans and instruments."""
        spans_changed = False
        for op in ops:
            if isinstance(op, Measure):
                self.telemetry.measure(op)
            elif isinstance(op, StartSpan):
                self._start(op)
                spans_changed = True
            elif isinstance(op, EndSpan):
                self._end(op)
                spans_changed = True
            elif isinstance(op, AddEvent):
                span = self.spans.get(op.key)
                if span is not None:
                    span.add_event(op.name, op.attributes, timestamp=op.at_ns)
        if spans_changed:
            current = self.mapper.current()
            span = None if current is None else self.spans.get(current)
            remember(self.session_id, None if span is None else span.get_span_context())

    def _start(self, op: StartSpan) -> None:
        parent = None if op.parent is None else self.spans.get(op.parent)
        # An explicit context: the parent's span, or an empty one for a root, never whatever
        # the observer task's own context happens to hold.
        context = otel_context.Context()
        if parent is not None:
            context = trace.set_span_in_context(parent, context)
        self.spans[op.key] = self.telemetry.tracer.start_span(
            op.name,
            context=context,
            kind=trace.SpanKind.CLIENT if op.key == "llm" else trace.SpanKind.INTERNAL,
            attributes=op.attributes,
            start_time=op.start_ns,
        )

    def _end(self, op: EndSpan) -> None:
        span = self.spans.pop(op.key, None)
        if span is None:
            return
        if op.attributes:
            span.set_attributes(op.attributes)
        if op.error is not None:
            span.set_status(Status(StatusCode.ERROR, op.error))
        span.end(end_time=op.end_ns)
