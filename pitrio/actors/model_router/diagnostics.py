"""What a failed response tells the supervisor beyond its text: status and retry-after. Pure.

A provider failure becomes an assistant message with ``stopReason: "error"`` whose
``errorMessage`` keeps the HTTP status and the vendor's text (retry classification, spec
§3.7.1, and overflow detection, §3.8.3, are regexes over it). The machine-readable parts ride
in the message's ``diagnostics`` (a field pi's assistant messages have, persisted with them):
one entry of type :data:`PROVIDER_ERROR` with ``error = {name, message, code}`` and
``details = {"status": 429, "retryAfterMs": 1500}`` (``cause`` for a connection that failed
before any response). Providers attach it only when a client asks (pi's messages have
none). The supervisor reads them with :func:`retry_after_ms` and :func:`http_status`; a
diagnostic never holds a key.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from pitrio.messages.agent import AssistantMessage, Diagnostic, now_ms

PROVIDER_ERROR = "provider_error"
"""``Diagnostic.type`` of the entry describing why a request failed."""


def error_diagnostic(
    message: str,
    *,
    name: str,
    status: int | None = None,
    code: str | None = None,
    retry_after_ms: int | None = None,
    cause: str | None = None,
    timestamp: int | None = None,
) -> Diagnostic:
    """The diagnostic of a failed request.

    ``name`` classifies the failure: ``HttpError`` (a non-2xx answer), ``StreamError`` (an
    error event inside a stream), ``ConnectionError``, ``TimeoutError``, ``MalformedStream``,
    ``CredentialError``.
    """
    error: dict[str, Any] = {"name": name, "message": message}
    if code is not None:
        error["code"] = code
    details: dict[str, Any] = {}
    if status is not None:
        details["status"] = status
    if retry_after_ms is not None:
        details["retryAfterMs"] = retry_after_ms
    if cause is not None:
        details["cause"] = cause  # what a terse text ("Connection error.") leaves out
    return Diagnostic(
        type=PROVIDER_ERROR,
        timestamp=now_ms() if timestamp is None else timestamp,
        error=error,
        details=details or None,
    )


def _details(message: AssistantMessage) -> dict[str, Any]:
    for diagnostic in message.diagnostics or ():
        if diagnostic.type == PROVIDER_ERROR and isinstance(diagnostic.details, dict):
            return diagnostic.details
    return {}


def retry_after_ms(message: AssistantMessage) -> int | None:
    """The delay the provider asked for before a retry (``retry-after`` headers), if any."""
    value = _details(message).get("retryAfterMs")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def http_status(message: AssistantMessage) -> int | None:
    """The HTTP status of a failed request, if it failed with one."""
    value = _details(message).get("status")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_name(message: AssistantMessage) -> str | None:
    """The failure class of a failed request (see :func:`error_diagnostic`)."""
    for diagnostic in message.diagnostics or ():
        if diagnostic.type == PROVIDER_ERROR and diagnostic.error:
            name = diagnostic.error.get("name")
            return name if isinstance(name, str) else None
    return None


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> int | None:
    """Milliseconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or a date).

    ``retry-after-ms`` wins (it is the more precise); negative, unparseable and past values
    are ignored. ``headers`` must be case-insensitive or lower-cased (httpx's are).
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return math.ceil(value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        import email.utils  # here: only an HTTP date needs it (start-up time, issue 38)

        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        now = time.time() if now is None else now
        seconds = when.timestamp() - now
        if seconds < 0:
            return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return math.ceil(seconds * 1000)
