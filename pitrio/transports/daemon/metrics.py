"""``/metrics``: the Prometheus text exposition format (version 0.0.4), written by hand.

Pure: a list of :class:`Metric` in, the text out. The values come from the host's and the
server's counters at scrape time, so there is no second registry to keep in step (the reason
for not using ``prometheus-client``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import attrs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@attrs.frozen
class Metric:
    """One metric family: its samples by label set."""

    name: str
    kind: Literal["counter", "gauge"]
    help: str
    samples: tuple[tuple[Mapping[str, str], float], ...]


def gauge(name: str, help: str, value: float, **labels: str) -> Metric:
    """A gauge with one sample."""
    return Metric(name, "gauge", help, ((labels, value),))


def counter(name: str, help: str, value: float, **labels: str) -> Metric:
    """A counter with one sample."""
    return Metric(name, "counter", help, ((labels, value),))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render(metrics: Iterable[Metric]) -> str:
    """The exposition text of ``metrics``."""
    lines: list[str] = []
    for metric in metrics:
        lines.append(f"# HELP {metric.name} {_escape_help(metric.help)}")
        lines.append(f"# TYPE {metric.name} {metric.kind}")
        for labels, value in metric.samples:
            if labels:
                inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(labels.items()))
                lines.append(f"{metric.name}{{{inner}}} {_number(value)}")
            else:
                lines.append(f"{metric.name} {_number(value)}")
    return "\n".join(lines) + "\n"
