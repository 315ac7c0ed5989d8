"""OpenTelemetry traces and metrics of every run (issue 26 part 2).

Off and free unless asked for: :func:`active` is ``None`` and sessions are not observed at all
until a :class:`~pitrio.telemetry.otel.Telemetry` is made active, by :func:`using` (tests,
embedding programs) or by :func:`from_environment` when the standard ``OTEL_*`` variables ask
for it (the ``pitrio`` command does this first thing). This module imports no OpenTelemetry.

- :mod:`pitrio.telemetry.mapper`: events -> span and metric operations (pure);
- :mod:`pitrio.telemetry.otel`: the shell carrying them out, the daemon's gauges;
- :mod:`pitrio.telemetry.config`: the SDK from ``OTEL_*``;
- :mod:`pitrio.telemetry.log_context`: the logging filter adding ``trace_id``/``span_id``.
"""

from __future__ import annotations

import contextvars
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pitrio.telemetry.otel import Telemetry

_ACTIVE: contextvars.ContextVar[Telemetry | None] = contextvars.ContextVar(
    "pitrio_telemetry", default=None
)


def active() -> Telemetry | None:
    """The telemetry sessions started now report to, if any."""
    return _ACTIVE.get()


def note_transport_retry(api: str, status: int | None) -> None:
    """A provider repeats a request that failed before anything streamed (HTTP 5xx/429, a
    failed connection): counted as ``pitrio.llm.transport_retries`` when telemetry is on. No
    session event shows these, so the provider tells the telemetry itself."""
    telemetry = _ACTIVE.get()
    if telemetry is not None:
        telemetry.transport_retry(api, status)


@contextmanager
def using(telemetry: Telemetry | None) -> Iterator[None]:
    """Observe every session started in this context (and in ``trio.run`` called inside it)."""
    token = _ACTIVE.set(telemetry)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextmanager
def from_environment(environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """Inside the block, telemetry as the ``OTEL_*`` variables say (none when they say
    nothing); leaving it flushes and stops the exporters."""
    from pitrio.telemetry.config import wanted

    env = os.environ if environ is None else environ
    if not wanted(env) or active() is not None:
        yield
        return
    from opentelemetry import metrics, trace

    from pitrio.telemetry.config import build
    from pitrio.telemetry.otel import Telemetry

    providers = build(env)
    # Global too, so an extension's own OpenTelemetry calls and the log filter see them.
    if providers.tracer_provider is not None:
        trace.set_tracer_provider(providers.tracer_provider)
    if providers.meter_provider is not None:
        metrics.set_meter_provider(providers.meter_provider)
    try:
        with using(Telemetry(providers.tracer_provider, providers.meter_provider)):
            yield
    finally:
        providers.shutdown()


def wanted_here() -> bool:
    """Do this process's ``OTEL_*`` variables ask for telemetry that is not active yet?"""
    from pitrio.telemetry.config import wanted

    return active() is None and wanted(os.environ)


def run_main(main: Callable[[Sequence[str]], int], argv: Sequence[str]) -> int:
    """``main(argv)`` with telemetry from the environment; a bad ``OTEL_*`` value is a
    start-up error (exit code 1) naming the variable."""
    from pitrio.telemetry.config import TelemetryConfigError

    try:
        with from_environment():
            return main(argv)
    except TelemetryConfigError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
