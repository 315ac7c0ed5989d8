"""Comparing a recorded event sequence with a replayed one (pure).

Events are compared as JSON after normalisation, which removes what is fresh in every run:

* every ``timestamp`` key is dropped (user messages, entries and summaries are stamped when
  they are made), and every ``durationMs`` (how long a response or a tool took: a measure of
  this run);
* values of the id keys (``id``, ``parentId``, ``firstKeptEntryId``, ``fromId``, ``targetId``,
  ``queueId``) are renamed ``#1``, ``#2``, ... in order of first appearance, one numbering per
  sequence, so an entry id and later references to it still agree while the random ids
  themselves do not matter;
* a ``message_update`` keeps its stream event without ``partial`` and drops ``message`` (the
  delta form; the whole message is compared at ``message_end``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

FRESH_KEYS = frozenset({"id", "parentId", "firstKeptEntryId", "fromId", "targetId", "queueId"})
DROPPED_KEYS = frozenset({"timestamp", "durationMs"})


def delta_form(event_json: Mapping[str, Any]) -> dict[str, Any]:
    """An event's JSON with a ``message_update``'s snapshots left out (what traces keep)."""
    out = dict(event_json)
    if out.get("type") == "message_update":
        out.pop("message", None)
        inner = out.get("assistantMessageEvent")
        if isinstance(inner, dict):
            out["assistantMessageEvent"] = {k: v for k, v in inner.items() if k != "partial"}
    return out


class Normaliser:
    """Normalises the events of one sequence (the id numbering spans the whole sequence)."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def event(self, event_json: Mapping[str, Any]) -> Any:
        """One event, normalised (see the module docstring)."""
        return self._value(delta_form(event_json))

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in DROPPED_KEYS:
                    continue
                if key in FRESH_KEYS and isinstance(item, str):
                    out[key] = self._names.setdefault(item, f"#{len(self._names) + 1}")
                else:
                    out[key] = self._value(item)
            return out
        if isinstance(value, list):
            return [self._value(item) for item in value]
        return value


def normalise_all(events: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Every event of one sequence, normalised."""
    normaliser = Normaliser()
    return [normaliser.event(event) for event in events]


@attrs.frozen
class Divergence:
    """Where two event sequences first differ: the event ``index`` (0-based), both normalised
    events (``None`` where a sequence has ended) and the first differing JSON ``path``."""

    index: int
    recorded: Any
    replayed: Any
    path: str

    def describe(self) -> str:
        """A few lines for people: index, path and both values."""
        return (
            f"first divergence at event {self.index + 1} ({self.path}):\n"
            f"  recorded: {_show(self.recorded)}\n"
            f"  replayed: {_show(self.replayed)}"
        )


def _show(value: Any, limit: int = 600) -> str:
    if value is None:
        return "(no event: the sequence ended)"
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= limit else text[:limit] + "..."


def first_path(a: Any, b: Any, path: str = "") -> str:
    """The first JSON path at which ``a`` and ``b`` differ (``""``: at the top)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key, _MISSING) != b.get(key, _MISSING):
                return first_path(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return path
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return first_path(x, y, f"{path}[{index}]")
        return f"{path}[{min(len(a), len(b))}]"
    return path


_MISSING = object()


def first_divergence(
    recorded: Sequence[Mapping[str, Any]], replayed: Sequence[Mapping[str, Any]]
) -> Divergence | None:
    """The first difference between two event sequences after normalisation, or ``None``."""
    left, right = normalise_all(recorded), normalise_all(replayed)
    for index in range(max(len(left), len(right))):
        a = left[index] if index < len(left) else None
        b = right[index] if index < len(right) else None
        if a != b:
            path = "(end)" if a is None or b is None else first_path(a, b) or "(whole event)"
            return Divergence(index=index, recorded=a, replayed=b, path=path)
    return None
