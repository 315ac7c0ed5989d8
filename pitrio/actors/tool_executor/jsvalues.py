"""JavaScript value semantics the tools must reproduce: number text, ``Number(str)``, string length.

pi's tools are written in TypeScript, so some of their observable texts follow JavaScript rules:
string lengths count UTF-16 code units, a timeout of ``5`` prints as ``5`` (not
``5.0``), the ``Received arguments`` block of a validation error is ``JSON.stringify(args, null,
2)``. This module is pure: no I/O, no trio.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_HEX = re.compile(r"0[xX][0-9a-fA-F]+\Z")
_OCT = re.compile(r"0[oO][0-7]+\Z")
_BIN = re.compile(r"0[bB][01]+\Z")
_DEC = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
# What JavaScript's String.prototype.trim removes (ECMAScript WhiteSpace + LineTerminator).
_JS_SPACE = (
    " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (astral characters count twice)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def js_number_to_string(value: float) -> str:
    """``String(value)`` for a JavaScript number (``5.0`` -> ``"5"``, ``1e21`` -> ``"1e+21"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:  # exact; beyond, digits come from repr
        return str(int(value))
    text = repr(value)  # the shortest round-tripping digits, as JavaScript uses
    from decimal import Decimal  # here: only fractions need it (~2 ms of a start, issue 38)

    digits = Decimal(text)
    # JavaScript writes plain decimals from 1e-6 up to 1e21 and exponent notation outside;
    # Python switches at other thresholds, so the same digits are re-rendered by its rule.
    if -6 <= digits.adjusted() < 21:
        plain = format(digits, "f")
        return plain.rstrip("0").rstrip(".") if "." in plain else plain
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text)
    sign = "+" if exponent > 0 else "-"
    return f"{mantissa}e{sign}{abs(exponent)}"


def js_parse_number(text: str) -> float | None:
    """``Number(text)`` for a string; ``None`` where JavaScript gives ``NaN`` or infinity."""
    stripped = text.strip(_JS_SPACE)
    if stripped == "":
        return 0.0
    if _HEX.match(stripped):
        return float(int(stripped[2:], 16))
    if _OCT.match(stripped):
        return float(int(stripped[2:], 8))
    if _BIN.match(stripped):
        return float(int(stripped[2:], 2))
    if _DEC.match(stripped):
        number = float(stripped)
        return number if math.isfinite(number) else None
    return None


def _js_jsonable(value: Any) -> Any:
    """Replace whole floats by ints so ``json`` prints numbers the way JavaScript does."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {str(key): _js_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_js_jsonable(item) for item in value]
    return value


def json_stringify(value: Any) -> str:
    """``JSON.stringify(value)``: compact, numbers as JavaScript prints them."""
    return json.dumps(_js_jsonable(value), separators=(",", ":"), ensure_ascii=False, default=str)


def json_stringify_pretty(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``; values JSON cannot hold are shown with ``str``."""
    return json.dumps(_js_jsonable(value), indent=2, ensure_ascii=False, default=str)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def to_utf8(text: str) -> bytes:
    """UTF-8 bytes of a JavaScript string: unpaired surrogates become U+FFFD, as Node writes."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")
