"""OpenTelemetry configured by the standard ``OTEL_*`` environment variables.

:func:`wanted` (pure) says whether the environment asks for telemetry at all: an OTLP
endpoint, or a traces/metrics exporter other than ``none``; ``OTEL_SDK_DISABLED=true`` wins
over both. Without any of them nothing here is imported and sessions are not observed.

:func:`build` makes the SDK's providers from the environment: ``OTEL_TRACES_EXPORTER`` and
``OTEL_METRICS_EXPORTER`` (comma lists of ``otlp``, ``console``, ``none``; default ``otlp``),
OTLP over HTTP/protobuf (``OTEL_EXPORTER_OTLP_PROTOCOL`` may only say ``http/protobuf``) with
its endpoint, headers, timeout and compression read by the exporter itself; the resource from
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``pitrio`` when neither
names one); the sampler, the batch processor and the metric interval from their own
``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ``OTEL_METRIC_EXPORT_INTERVAL``. The ``console``
exporters write to stderr (stdout is the RPC channel, or print mode's answer).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import attrs

from pitrio.errors import PitrioError

EXPORTERS = ("otlp", "console", "none")
"""The exporter names ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` take."""

ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


class TelemetryConfigError(PitrioError):
    """An ``OTEL_*`` variable names something pitrio cannot do."""


def _disabled(environ: Mapping[str, str]) -> bool:
    return environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def exporters(environ: Mapping[str, str], signal: str) -> tuple[str, ...]:
    """The exporters ``OTEL_<signal>_EXPORTER`` names (``otlp`` when unset)."""
    variable = f"OTEL_{signal}_EXPORTER"
    raw = environ.get(variable, "").strip().lower() or "otlp"
    names = tuple(name.strip() for name in raw.split(",") if name.strip())
    for name in names:
        if name not in EXPORTERS:
            raise TelemetryConfigError(
                f"{variable}={environ.get(variable)}: {name!r} is not an exporter pitrio has "
                f"(one or more of {', '.join(EXPORTERS)})"
            )
    return tuple(name for name in names if name != "none")


def wanted(environ: Mapping[str, str]) -> bool:
    """Does the environment ask for telemetry? (Pure: reads only ``environ``.)"""
    if _disabled(environ):
        return False
    if any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES):
        return True
    for signal in ("TRACES", "METRICS"):
        value = environ.get(f"OTEL_{signal}_EXPORTER", "").strip().lower()
        if value and value != "none":
            return True
    return False


@attrs.frozen
class Providers:
    """The SDK providers :func:`build` made (``None``: that signal exports nowhere)."""

    tracer_provider: Any
    meter_provider: Any

    def shutdown(self) -> None:
        """Flush what is buffered and stop the exporters (blocking: call it outside trio)."""
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None:
                provider.shutdown()


def build(environ: Mapping[str, str]) -> Providers:
    """The SDK providers the environment describes (raises :class:`TelemetryConfigError`)."""
    for variable in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ):
        protocol = environ.get(variable, "").strip()
        if protocol and protocol != "http/protobuf":
            raise TelemetryConfigError(
                f"{variable}={protocol}: pitrio exports OTLP over http/protobuf only"
            )
    span_exporters = exporters(environ, "TRACES")
    metric_exporters = exporters(environ, "METRICS")
    try:
        resource = _resource()
        tracer_provider = _tracer_provider(span_exporters, resource) if span_exporters else None
        meter_provider = _meter_provider(metric_exporters, resource) if metric_exporters else None
    except ImportError as exc:
        raise TelemetryConfigError(
            f"OTEL_* variables ask for OpenTelemetry, but {exc.name or 'its SDK'} is not "
            "installed (pip install 'pitrio[otel]')"
        ) from exc
    return Providers(tracer_provider=tracer_provider, meter_provider=meter_provider)


def _resource() -> Any:
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource

    from pitrio.telemetry._meta import version

    resource = Resource.create({SERVICE_VERSION: version()})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "pitrio"}))
    return resource


def _tracer_provider(names: tuple[str, ...], resource: Any) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(resource=resource)
    for name in names:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            # stderr: stdout is the RPC channel, or the answer of print mode.
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    return provider


def _meter_provider(names: tuple[str, ...], resource: Any) -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    readers = []
    for name in names:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        else:
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(out=sys.stderr)))
    return MeterProvider(resource=resource, metric_readers=readers)
