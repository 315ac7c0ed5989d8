"""Streamed JSON chunks that differ only in one string, read without parsing them whole.

A streaming server sends thousands of chunks alike but for the delta's text: the same
``id``, ``created``, ``model`` and envelope around ``"content":"tok "``. Parsing each one
whole with a JSON parser, and then walking the dict it made, costs several microseconds a
delta (issue 38: the 20,000-delta stream). A :class:`ChunkTemplate` is learned from one such
chunk: the text before the string's JSON token (``head``) and after it (``tail``). A later
chunk that starts with ``head``, ends with ``tail`` and has a single JSON string between them
is the same chunk with another string in that place, so only the string is parsed.

Sound by construction, not by assumption about the server's key order or spacing: a template
is kept only if ``head + probe + tail`` parses to the learned chunk with the probe in the
string's place (:func:`learn`). JSON has no context a string token can change, so any string
token in that place gives the same chunk with that string there. A chunk that does not match
is parsed whole, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import orjson

_PROBE = '\x00pitrio probe \u00e9"'
"""A string no server sends as a delta, with escapes in it (checks the slot, see learn)."""


@attrs.frozen(slots=True)
class ChunkTemplate:
    """A chunk's text around one string value (``field`` names what the value is)."""

    field: str
    head: str
    tail: str

    def value(self, data: str) -> str | None:
        """The string in the template's place if ``data`` is the template's chunk with some
        non-empty string there, else ``None`` (parse ``data`` whole)."""
        values, _ = self.run((("message", data),), 0)
        return values[0] if values else None

    def run(self, events: Sequence[tuple[str, str]], start: int) -> tuple[list[str], int]:
        """:meth:`value` of each of ``events[start:]`` (SSE ``(event, data)`` pairs) up to the
        first that is not the template's chunk: those strings, and that event's position
        (``len(events)`` when all were). One loop for a read's chunks (issue 38)."""
        head, tail = self.head, self.tail
        skip, keep = len(head), len(tail) + 1
        values: list[str] = []
        position = start
        for _, data in events[start:] if start else events:
            end = len(data) - keep  # the closing quote's index, if the template's
            # A token needs its two quotes and a character (an empty one: parse it whole).
            if (
                end - skip < 2
                or data[end] != '"'
                or data[skip] != '"'
                or not data.startswith(head)
                or not data.endswith(tail)
            ):
                break
            try:
                value = orjson.loads(data[skip : end + 1])
            except orjson.JSONDecodeError:
                break  # e.g. two values, `"a","b":"c"`: not one string token
            if type(value) is not str:
                break
            values.append(value)
            position += 1
        return values, position


def learn(data: str, path: Sequence[str | int], field: str) -> ChunkTemplate | None:
    """A template of the JSON text ``data`` around the string at ``path`` (keys and list
    indexes from the top), or ``None`` when the string's token cannot be told apart.

    The token is looked for after the last ``"key":`` of the path's last key; whatever is
    found is checked by parsing the text with a probe string in its place.
    """
    key = path[-1]
    if not isinstance(key, str):
        return None
    start = _token_start(data, key)
    if start is None:
        return None
    end = _token_end(data, start)
    if end is None:
        return None
    head, tail = data[:start], data[end:]
    # A fresh parse of the text to put the probe in, rather than a deep copy of the caller's
    # parse: the copy was most of a learning's cost, and every reply learns at its first
    # delta (issue 38).
    expected = orjson.loads(data)
    holder = expected
    try:
        for step in path[:-1]:
            holder = holder[step]
        holder[key] = _PROBE
        probed = orjson.loads(head + orjson.dumps(_PROBE).decode() + tail)
    except (LookupError, TypeError, orjson.JSONDecodeError):
        return None
    if probed != expected:
        return None  # the token found is not that string's (a key like `x\"content` ...)
    return ChunkTemplate(field, head, tail)


def _token_start(data: str, key: str) -> int | None:
    """Where the string value after the last ``"key"`` and its colon begins."""
    at = data.rfind(f'"{key}"')
    if at < 0:
        return None
    position = _skip_space(data, at + len(key) + 2)
    if position >= len(data) or data[position] != ":":
        return None
    position = _skip_space(data, position + 1)
    if position >= len(data) or data[position] != '"':
        return None
    return position


def _token_end(data: str, start: int) -> int | None:
    """The index just past the string token opening at ``start`` (its closing quote)."""
    position = start + 1
    while True:
        quote = data.find('"', position)
        if quote < 0:
            return None
        backslashes = 0
        while data[quote - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return quote + 1
        position = quote + 1


def _skip_space(data: str, position: int) -> int:
    while position < len(data) and data[position] in " \t\r\n":
        position += 1
    return position


__all__ = ["ChunkTemplate", "learn"]
