"""What an HTTP provider calls at each stage of a request (pi 1.6.0's provider-request hooks).

A request's :class:`~pitrio.messages.model.StreamOptions` may carry a :class:`ProviderHooks`;
the session hands one over when its extensions listen to any of these stages, and the
provider calls it in pi 1.6.0's order: ``before_provider_headers`` (the headers, changed in
place; a ``None`` value removes a header), ``before_provider_request`` (the JSON payload,
possibly replaced), once per request (the transport's own repeats reuse them), then for each
HTTP answer ``after_provider_response`` (status and headers, before the body is read) and
``provider_stream_event`` for each decoded stream event, awaited in order. A stage nobody
listens to costs one :meth:`ProviderHooks.wants` call per request.

The provider side is sans-IO apart from awaiting the hooks: the functions here only decide
what to hand over and apply what comes back.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

HEADERS = "before_provider_headers"
PAYLOAD = "before_provider_request"
RESPONSE = "after_provider_response"
STREAM_EVENT = "provider_stream_event"


class ProviderHooks(Protocol):
    """The stages of a request an observer (the session's extensions) takes part in."""

    def wants(self, stage: str) -> bool:
        """Whether anything listens to ``stage`` (one of the names above)."""
        ...

    async def headers(self, headers: dict[str, str | None]) -> None:
        """Change ``headers`` in place (``None`` removes one)."""

    async def payload(self, payload: Any) -> Any:
        """The payload to send (``payload`` itself when unchanged)."""

    async def response(self, status: int, headers: dict[str, str]) -> None:
        """An HTTP answer arrived (its body not read yet)."""

    async def stream_event(self, provider: str, api: str, model: str, data: Any) -> None:
        """One decoded stream event (read-only)."""


def applied_headers(changed: dict[str, str | None]) -> dict[str, str]:
    """The headers after the hooks: removed ones (``None``) dropped, the rest as text."""
    return {name: str(value) for name, value in changed.items() if value is not None}


def encoded_payload(payload: Any) -> bytes:
    """A replaced payload as the request's body."""
    return orjson.dumps(payload)


def event_data(data: str) -> Any:
    """A stream event's data as the hooks see it: decoded JSON when it is JSON, else the text
    (pi hands over the earliest structured value it has)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
