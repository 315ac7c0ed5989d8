"""The error texts of the HTTP providers, as pi (its vendor SDKs) words them (pure).

A non-2xx answer, an error event inside a stream, and a request that failed in transport each
get the text pi shows; the vendor's error type, when it gave one, goes to the diagnostics.
"""

from __future__ import annotations

import re
import time
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal

import orjson

if TYPE_CHECKING:
    import httpx

_MAX_TEXT = 2000  # characters of a non-JSON error body kept in the message


def _vendor_error(document: Any) -> tuple[str | None, str | None]:
    """(kind, message) from the usual vendor error shapes; (None, None) if none matches."""
    if isinstance(document, list) and document:
        return _vendor_error(document[0])  # Google's OpenAI endpoint wraps it in a list
    if not isinstance(document, dict):
        return None, None
    error = document.get("error", document)
    if isinstance(error, str):
        return None, error
    if not isinstance(error, dict):
        return None, None
    message = error.get("message") or error.get("detail") or document.get("message")
    if not isinstance(message, str):
        message = None
    kind: Any = None
    for key in ("type", "code", "status"):
        value = error.get(key)
        if value is not None and value != "error" and value != "":
            kind = str(value)
            break
    metadata = error.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str) and message:
        # OpenRouter puts the upstream vendor's own text here; overflow patterns need it.
        message = f"{message} ({metadata['raw']})"
    return kind, message


def describe_error_body(body: bytes) -> tuple[str | None, str]:
    """(vendor error type, vendor text) of an error body; the text is ``""`` when empty."""
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return None, ""
    try:
        kind, message = _vendor_error(orjson.loads(body))
    except orjson.JSONDecodeError:
        kind, message = None, None
    if message is None:
        return kind, text[:_MAX_TEXT]
    return kind, message


ErrorStyle = Literal["openai", "openai-completions", "anthropic", "mistral", "codex", "google"]
"""Whose SDK's error texts a provider reproduces: pi's providers show the SDK's message as is
(OpenAI's reads the body's ``error`` member, Anthropic's the whole body; pi's completions
provider appends an OpenRouter ``metadata.raw`` on a line of its own)."""


def _js_truthy(value: Any) -> bool:
    # JavaScript's truthiness, which the SDKs' checks use: objects and arrays are always true.
    if isinstance(value, dict | list):
        return True
    return bool(value)


def _js_json(value: Any) -> str:
    """``JSON.stringify``'s compact form."""
    return orjson.dumps(value).decode()


def _sdk_text(error: Any, fallback: str | None) -> str | None:
    """The text the SDKs' ``APIError`` builds from a parsed error: its string ``message``, a
    non-string one as JSON, else the whole error as JSON, else ``fallback``."""
    message = error.get("message") if isinstance(error, dict) else None
    if _js_truthy(message):
        return message if isinstance(message, str) else _js_json(message)
    if _js_truthy(error):
        return _js_json(error)
    return fallback


def _raw_metadata(error: Any) -> str | None:
    metadata = error.get("metadata") if isinstance(error, dict) else None
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if not _js_truthy(raw):
        return None
    return raw if isinstance(raw, str) else _js_json(raw)


def _parse_json(body: bytes) -> tuple[bool, Any]:
    try:
        return True, orjson.loads(body)
    except orjson.JSONDecodeError:
        return False, None


def http_error_message(
    status: int, body: bytes, style: ErrorStyle = "openai"
) -> tuple[str, str | None]:
    """The ``errorMessage`` of a non-2xx answer, as pi shows it (the SDK's text), and the
    vendor's error type if it gave one (for diagnostics).

    OpenAI-style: ``"<status> <error.message>"``; Anthropic-style: ``"<status> <the body as
    JSON>"`` (its SDK finds no top-level message); a body that is not JSON: ``"<status>
    <text>"``; nothing usable: ``"<status> status code (no body)"``.
    """
    kind, _ = _vendor_error(_parse_json(body)[1])
    if style == "google":
        return google_error_text(status, body), kind
    text = body.decode("utf-8", errors="replace")
    if style == "mistral":
        return mistral_error_text(status, text), kind
    if style == "codex":
        return codex_error_text(status, text), kind
    parsed_ok, parsed = _parse_json(body)
    fallback = None if parsed_ok and _js_truthy(parsed) else text
    if style == "anthropic":
        error = parsed if parsed_ok else None
    else:
        error = parsed.get("error") if isinstance(parsed, dict) else None
    message = _sdk_text(error, fallback)
    result = f"{status} {message}" if message else f"{status} status code (no body)"
    if style == "openai-completions":
        result = _with_error_body(status, result, error)
    raw = _raw_metadata(error) if style == "openai-completions" else None
    if raw and raw not in result:
        result += "\n" + raw
    return result, kind


PROVIDER_ERROR_BODY_MAX = 4000
"""Characters of an error body pi 1.6.0 shows in a provider's error text before cutting it."""


def _with_error_body(status: int, sdk_text: str, error: Any) -> str:
    """pi 1.6.0's text of an SDK error that parsed an error body: ``"<status>: <body>"``.

    Since pi 1.6.0 the completions provider shows the parsed ``error`` member itself (compact
    JSON, cut at :data:`PROVIDER_ERROR_BODY_MAX` characters) rather than the SDK's one-line
    summary, unless that summary already holds it. Without such a body (no JSON, an empty or
    non-object ``error``), the SDK's text stands.
    """
    if not isinstance(error, dict) or not error:
        return sdk_text
    body = _js_json(error).strip()
    if not body or body in sdk_text:
        return sdk_text
    if len(body) > PROVIDER_ERROR_BODY_MAX:
        cut = len(body) - PROVIDER_ERROR_BODY_MAX
        body = f"{body[:PROVIDER_ERROR_BODY_MAX]}... [truncated {cut} chars]"
    return f"{status}: {body}"


MISTRAL_MAX_ERROR_BODY = 4000
"""Characters of a Mistral error body kept in the message (pi's limit)."""


def mistral_error_text(status: int, body: str) -> str:
    """pi's Mistral error text: ``"Mistral API error (<status>): <body>"``, the body trimmed
    and cut at :data:`MISTRAL_MAX_ERROR_BODY` characters with a note of how many were cut."""
    text = body.strip()
    if not text:
        return f"Mistral API error ({status}): status code (no body)"
    if len(text) > MISTRAL_MAX_ERROR_BODY:
        cut = len(text) - MISTRAL_MAX_ERROR_BODY
        text = f"{text[:MISTRAL_MAX_ERROR_BODY]}... [truncated {cut} chars]"
    return f"Mistral API error ({status}): {text}"


_USAGE_LIMIT = re.compile(r"usage_limit_reached|usage_not_included|rate_limit_exceeded", re.I)


def codex_error_text(status: int, body: str, now: float | None = None) -> str:
    """pi's text for a failed ChatGPT (Codex) request: a usage-limit note on a 429 or a
    usage-limit code (with the plan and the minutes until ``resets_at``), else the error's
    ``message``, else the body, else ``Request failed``. ``now``: seconds since the epoch."""
    message = body or "Request failed"
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return message
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict) or not error:
        return message
    code = str(error.get("code") or error.get("type") or "")
    if _USAGE_LIMIT.search(code) or status == 429:
        plan_type = error.get("plan_type")
        plan = f" ({str(plan_type).lower()} plan)" if plan_type else ""
        resets = error.get("resets_at")
        when = ""
        if isinstance(resets, int | float) and not isinstance(resets, bool) and resets:
            clock = time.time() if now is None else now
            minutes = max(0, round((resets * 1000 - clock * 1000) / 60000))
            when = f" Try again in ~{minutes} min."
        return f"You have hit your ChatGPT usage limit{plan}.{when}".strip()
    said = error.get("message")
    return said if isinstance(said, str) and said else message


def google_error_text(status: int, body: bytes) -> str:
    """The Google SDK's text of a non-2xx answer (pi shows it as is): the error body as
    compact JSON; a body that is not JSON wrapped as ``{"error": {message, code, status}}``
    with the status's reason phrase."""
    parsed_ok, parsed = _parse_json(body)
    if not parsed_ok:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        message = body.decode("utf-8", errors="replace")
        parsed = {"error": {"message": message, "code": status, "status": phrase}}
    return orjson.dumps(parsed).decode()


def stream_error_message(document: Any, style: ErrorStyle = "openai") -> tuple[str, str | None]:
    """The ``errorMessage`` of an error event inside a stream (no HTTP status there): the
    SDK's text of the event's ``error`` member (OpenAI) or of the whole event (Anthropic)."""
    kind, _ = _vendor_error(document)
    error = (
        document
        if style == "anthropic"
        else (document.get("error") if isinstance(document, dict) else None)
    )
    message = _sdk_text(error, None) or "(no status code or body)"
    raw = _raw_metadata(error) if style == "openai-completions" else None
    if raw:
        message += "\n" + raw
    return message, kind


def describe_transport_error(
    exc: httpx.TransportError, *, streaming: bool = False, read_timeout: float | None = None
) -> str:
    """The error text of a failed request. A read timeout (the one limit on silence: before
    the first byte and between two reads alike) says which it was: no response at all, or a
    stream that had started and then stalled (``streaming``)."""
    import httpx

    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        phase = {
            httpx.ConnectTimeout: "while connecting",
            httpx.ReadTimeout: "waiting for the provider",
            httpx.WriteTimeout: "while sending the request",
            httpx.PoolTimeout: "waiting for a free connection",
        }.get(type(exc), "")
        message = f"Request timed out {phase}".rstrip()
        if isinstance(exc, httpx.ReadTimeout) and read_timeout is not None:
            quiet = f"{read_timeout:g} s"
            what = f"the stream stalled for {quiet}" if streaming else f"no response in {quiet}"
            message = f"{message}: {what}"
        return message
    return f"Connection error: {text}"


def unresolved_host_message(exc: BaseException, url: str) -> str | None:
    """``"cannot reach HOST: name or service not known"`` when ``exc`` (or what caused it)
    is a failed name lookup (``socket.gaierror``), else ``None``."""
    import socket
    from urllib.parse import urlsplit

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            reason = cause.strerror or str(cause)
            reason = reason[:1].lower() + reason[1:]
            host = urlsplit(url).hostname or url
            return f"cannot reach {host}: {reason}"
        cause = cause.__cause__ or cause.__context__
    return None


__all__ = [
    "ErrorStyle",
    "codex_error_text",
    "describe_error_body",
    "describe_transport_error",
    "google_error_text",
    "http_error_message",
    "mistral_error_text",
    "stream_error_message",
    "unresolved_host_message",
]
