"""JavaScript-compatible string helpers for the supervisor's policies.

pi measures text in UTF-16 code units and writes values with ``JSON.stringify``; the token
estimates, truncation markers and serialised tool calls below must agree with pi's to the
character, so a recorded compaction can be reproduced.
"""

from __future__ import annotations

import json
import math
from typing import Any

_JS_SAFE_INT = 2**53


def js_length(text: str) -> int:
    """Length of ``text`` as JavaScript counts it (UTF-16 code units)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def js_slice(text: str, length: int) -> str:
    """The first ``length`` UTF-16 code units of ``text`` (``text.slice(0, length)``)."""
    if text.isascii():
        return text[:length]
    units = text.encode("utf-16-le", errors="surrogatepass")[: 2 * length]
    # A cut through a surrogate pair leaves a lone surrogate, as JavaScript's slice does.
    return units.decode("utf-16-le", errors="surrogatepass")


def js_sort_key(text: str) -> bytes:
    """Sort key giving JavaScript's default ``Array.prototype.sort`` order (UTF-16 units)."""
    return text.encode("utf-16-be", errors="surrogatepass")


def _js_value(value: Any) -> Any:
    # JSON.stringify writes whole floats without a fraction and non-finite numbers as null.
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and -_JS_SAFE_INT < value < _JS_SAFE_INT:
            return int(value)
        return value
    if isinstance(value, dict):
        return {str(k): _js_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_js_value(v) for v in value]
    return value


def js_stringify(value: Any) -> str:
    """``value`` as JavaScript's ``JSON.stringify`` writes it (compact, non-ASCII kept)."""
    return json.dumps(_js_value(value), ensure_ascii=False, separators=(",", ":"))


def estimate_text_tokens(chars: int) -> int:
    """pi's token heuristic: one token per four characters, rounded up."""
    return math.ceil(chars / 4)
