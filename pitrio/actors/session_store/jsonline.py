"""Parsing one line of a session file as pi writes it (pure).

orjson refuses two things pi's files can hold and pi itself reads:

* a **lone surrogate** escape (``"\\ud800"``): ``JSON.stringify`` writes one for a string
  holding half of a UTF-16 pair (a cut emoji, say). Such a line is parsed again with the
  standard library's parser, which accepts it and keeps the surrogate in the parsed string.
  Every encoder of pitrio's (the codec's ``dumps``, the providers' request bodies) writes such a
  string back with the surrogate escaped, as ``JSON.stringify`` does, so the value travels on to
  responses, events and requests unchanged, as in pi. The line itself stays as it was;
* a **byte order mark** before the header: stripped by :func:`strip_bom` (the first line only).

A line neither parses is either torn (:func:`is_truncated_json`: the start of an object a
crash cut short) or malformed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def strip_bom(raw: bytes) -> bytes:
    """The first line of a file without a UTF-8 byte order mark."""
    return raw[len(BOM) :] if raw.startswith(BOM) else raw


def _refuse_constant(name: str) -> Any:
    # orjson refuses NaN and Infinity; the fallback must not accept more than it.
    raise ValueError(f"invalid JSON constant {name}")


def loads_line(raw: bytes) -> Any:
    """Parse one JSON line; raises :class:`orjson.JSONDecodeError` as orjson does.

    A line orjson refuses only because of a lone surrogate escape parses (see the module)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as refused:
        if _SURROGATE_ESCAPE.search(raw) is None:
            raise
        try:
            value = json.loads(raw, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            raise refused from None
        return value


def is_truncated_json(raw: bytes, exc: orjson.JSONDecodeError) -> bool:
    """Whether ``raw`` looks like the beginning of a JSON object cut short by a crash."""
    if not raw.lstrip().startswith(b"{"):
        return False
    # orjson counts the position in characters of the decoded text, not in bytes.
    text = exc.doc if isinstance(exc.doc, str) else raw.decode("utf-8", "replace")
    if exc.msg.startswith("unexpected end of data") and exc.pos >= len(text.rstrip()):
        return True
    # A write cut inside a multi-byte UTF-8 character: valid except for the last few bytes.
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return bad.reason == "unexpected end of data" and bad.end == len(raw)
    return False
