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
  delta form; the whole message is compared at ``message_end``);
* in a ``system`` message's ``cwd`` section the session's working directory reads
  ``{cwd}``: a replay runs in a directory of its own, so each sequence is given its own
  (the rest of the prompt is compared as it is); for the same reason a compaction's
  ``estimatedTokensAfter``, which counts that system message's characters, is left out when
  the sequence's cwd is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

FRESH_KEYS = frozenset({"id", "parentId", "firstKeptEntryId", "fromId", "targetId", "queueId"})
DROPPED_KEYS = frozenset({"timestamp", "durationMs"})
CWD_PLACEHOLDER = "{cwd}"
CWD_DEPENDENT_KEYS = frozenset({"estimatedTokensAfter"})


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
    """Normalises the events of one sequence (the id numbering spans the whole sequence);
    ``cwd`` is the working directory of the session that emitted them."""

    def __init__(self, cwd: str | None = None) -> None:
        self._names: dict[str, str] = {}
        self._cwd = cwd

    def event(self, event_json: Mapping[str, Any]) -> Any:
        """One event, normalised (see the module docstring)."""
        return self._value(delta_form(event_json))

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict):
            if self._cwd and value.get("role") == "system":
                value = self._system(value, self._cwd)
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in DROPPED_KEYS or (self._cwd and key in CWD_DEPENDENT_KEYS):
                    continue
                if key in FRESH_KEYS and isinstance(item, str):
                    out[key] = self._names.setdefault(item, f"#{len(self._names) + 1}")
                else:
                    out[key] = self._value(item)
            return out
        if isinstance(value, list):
            return [self._value(item) for item in value]
        return value

    @staticmethod
    def _system(message: dict[str, Any], cwd: str) -> dict[str, Any]:
        sections = message.get("sections")
        if not isinstance(sections, dict) or not isinstance(sections.get("cwd"), str):
            return message
        # The prompt writes the directory with forward slashes.
        text = sections["cwd"].replace(cwd.replace("\\", "/"), CWD_PLACEHOLDER)
        return {**message, "sections": {**sections, "cwd": text}}


def normalise_all(events: Sequence[Mapping[str, Any]], cwd: str | None = None) -> list[Any]:
    """Every event of one sequence (emitted by a session in ``cwd``), normalised."""
    normaliser = Normaliser(cwd)
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
    recorded: Sequence[Mapping[str, Any]],
    replayed: Sequence[Mapping[str, Any]],
    *,
    recorded_cwd: str | None = None,
    replayed_cwd: str | None = None,
) -> Divergence | None:
    """The first difference between two event sequences after normalisation, or ``None``;
    each ``*_cwd`` is the working directory of the session that emitted the sequence."""
    left = normalise_all(recorded, recorded_cwd)
    right = normalise_all(replayed, replayed_cwd)
    for index in range(max(len(left), len(right))):
        a = left[index] if index < len(left) else None
        b = right[index] if index < len(right) else None
        if a != b:
            path = "(end)" if a is None or b is None else first_path(a, b) or "(whole event)"
            return Divergence(index=index, recorded=a, replayed=b, path=path)
    return None
