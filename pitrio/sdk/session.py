"""One session as a transport drives it: handle, options, command replies, errors, events.

A transport starts sessions with :class:`SessionOptions` (through :class:`SessionRuntime` in RPC
mode, or through the host in the daemon), sends commands through :class:`SessionHandle` and
forwards its :class:`Sequenced` events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitrio.actors.session.bootstrap import SessionOptions
from pitrio.actors.session.command_ledger import (
    CommandLedger,
    Fresh,
    InProgress,
    Repeat,
    fingerprint,
)
from pitrio.actors.session.commands import SessionState, StreamingBehavior
from pitrio.actors.session.extensions.asks import ModelScope, ScopedModel, ShutdownRequest
from pitrio.actors.session.fanout import Sequenced, SequencedRun, event_weight
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session.operations import CycleResult
from pitrio.actors.session.runtime import SessionReplacementCancelled, SessionRuntime
from pitrio.actors.session.tool_selection import tool_list_error
from pitrio.actors.session_store.command_stamp import (
    CommandStamp,
    current_stamp,
    read_stamped_entries,
    stamping,
)
from pitrio.actors.session_store.paths import SESSION_ID
from pitrio.actors.session_store.storage import collector_paused, freeze_bulk_loads

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.events import SessionBeforeSwitchEvent
    from pitrio.actors.session.extensions.ui import UiResponse
    from pitrio.actors.session.user_bash import BashResult

__all__ = [
    "SESSION_ID",
    "BashResult",
    "CommandLedger",
    "CommandStamp",
    "CycleResult",
    "Fresh",
    "InProgress",
    "ModelScope",
    "Repeat",
    "ScopedModel",
    "Sequenced",
    "SequencedRun",
    "SessionBeforeSwitchEvent",
    "SessionHandle",
    "SessionOptions",
    "SessionReplacementCancelled",
    "SessionRuntime",
    "SessionState",
    "ShutdownRequest",
    "StreamingBehavior",
    "UiResponse",
    "collector_paused",
    "current_stamp",
    "event_weight",
    "fingerprint",
    "freeze_bulk_loads",
    "read_stamped_entries",
    "stamping",
    "tool_list_error",
]


def __getattr__(name: str) -> Any:
    """``SessionBeforeSwitchEvent`` on first access: its module (the extensions' events) is
    imported by sessions that have extensions, not at every start (issue 38); ``BashResult``
    likewise, with the user shell command's runner (the first ``bash`` command)."""
    if name == "BashResult":
        from pitrio import _attrs_cache

        with _attrs_cache.caching():  # the runner's classes: first use, from the cache
            from pitrio.actors.session.user_bash import BashResult

        return BashResult
    if name == "UiResponse":  # the UI protocol: the first answer to an extension's dialog
        from pitrio import _attrs_cache

        with _attrs_cache.caching():  # its classes: first use, from the cache
            from pitrio.actors.session.extensions.ui import UiResponse

        return UiResponse
    if name == "SessionBeforeSwitchEvent":
        from pitrio import _attrs_cache

        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import SessionBeforeSwitchEvent

        return SessionBeforeSwitchEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
