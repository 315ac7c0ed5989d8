"""SDK providers exporting into memory, for the telemetry tests."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pitrio.telemetry.otel import Telemetry


@attrs.define
class Memory:
    """A telemetry whose spans and metrics stay in memory."""

    telemetry: Telemetry
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        """The spans ended so far."""
        return list(self.spans.get_finished_spans())

    def metrics(self) -> dict[str, list[tuple[dict[str, object], float]]]:
        """Instrument name -> (attributes, value or sum) of each data point collected now."""
        out: dict[str, list[tuple[dict[str, object], float]]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.sum  # a histogram: its sum
                        out.setdefault(metric.name, []).append((dict(point.attributes), value))
        return out


@pytest.fixture
def memory() -> Iterator[Memory]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Memory(Telemetry(tracer_provider, meter_provider), spans, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()
