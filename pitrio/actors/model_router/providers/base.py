"""What every provider adapter implements: a stream function.

A stream function sends the :mod:`assistant stream events <pitrio.messages.stream>` of one
response on ``send`` (``start`` first, exactly one ``done`` or ``error`` last) and returns. It
never raises for request, model or runtime failures: those become a final ``error`` event whose
message has ``stop_reason="error"`` and an ``error_message``. Cancellation (abort) is ordinary
trio cancellation of the task running it; the caller turns the last partial message into the
``aborted`` one, so a provider needs no abort logic beyond being cancellable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent

EventSender = trio.MemorySendChannel[AssistantMessageEvent]

StreamFn = Callable[[Model, LlmContext, StreamOptions, EventSender], Awaitable[None]]
"""``await stream(model, context, options, send)``: stream one response as events on ``send``."""
