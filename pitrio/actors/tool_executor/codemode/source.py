"""A codemode input: JavaScript, optionally after one ``// @options: {...}`` line (pure).

The rules and messages are pi 1.6.0's (its ``parseCodemodeSource``): empty input, options
that are not a JSON object of the two known fields, and an options line anywhere but first
fail the call before anything runs.
"""

from __future__ import annotations

import json

import attrs

from pitrio.errors import ToolError

OPTIONS_PREFIX = "// @options:"
FIELDS = ("max_output_tokens", "timeout_ms")
_FIELDS_TEXT = "`max_output_tokens` and `timeout_ms`"
MAX_TIMEOUT_MS = 2_147_483_647
_MAX_SAFE = 2**53 - 1


class SourceError(ToolError):
    """The input cannot be run (its message is the tool's error text)."""


@attrs.frozen
class Source:
    """The script and its options (``None``: not given)."""

    code: str
    max_output_tokens: int | None = None
    timeout_ms: int | None = None


def _safe_int(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value == int(value) and 0 <= value <= _MAX_SAFE


def _options(text: str) -> tuple[int | None, int | None]:
    if text == "":
        raise SourceError(f"@options must be a JSON object with supported fields {_FIELDS_TEXT}")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SourceError(
            f"@options must be valid JSON with supported fields {_FIELDS_TEXT}: {exc}"
        ) from None
    if not isinstance(value, dict):
        raise SourceError(f"@options must be a JSON object with supported fields {_FIELDS_TEXT}")
    for key in value:
        if key not in FIELDS:
            raise SourceError(f"@options only supports {_FIELDS_TEXT}; got `{key}`")
    tokens = value.get("max_output_tokens")
    if tokens is not None and not _safe_int(tokens):
        raise SourceError("@options field `max_output_tokens` must be a non-negative safe integer")
    timeout = value.get("timeout_ms")
    if timeout is not None and (not _safe_int(timeout) or timeout == 0 or timeout > MAX_TIMEOUT_MS):
        raise SourceError(
            f"@options field `timeout_ms` must be a positive integer up to {MAX_TIMEOUT_MS}"
        )
    return (
        None if tokens is None else int(tokens),
        None if timeout is None else int(timeout),
    )


def parse_source(text: str) -> Source:
    """Split the options line from the script; raises :class:`SourceError`."""
    if text.strip() == "":
        raise SourceError(
            "Expected JavaScript source text (non-empty). Provide JS only, optionally with a "
            'first line `// @options: {"max_output_tokens": 1000}`.'
        )
    lines = text.split("\n")
    for number, line in enumerate(lines[1:], start=2):
        if line.lstrip().startswith(OPTIONS_PREFIX):
            raise SourceError(
                f"The {OPTIONS_PREFIX} line must be the first line of the input; found one "
                f"on line {number}"
            )
    first = lines[0].removesuffix("\r").lstrip()
    if not first.startswith(OPTIONS_PREFIX):
        return Source(code=text)
    newline = text.find("\n")
    code = "" if newline < 0 else text[newline:]
    if code.strip() == "":
        raise SourceError(
            "The @options line must be followed by JavaScript source on subsequent lines"
        )
    tokens, timeout = _options(first[len(OPTIONS_PREFIX) :].strip())
    return Source(code=code, max_output_tokens=tokens, timeout_ms=timeout)
