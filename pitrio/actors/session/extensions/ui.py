"""The extension UI (spec §7.2 ``ctx.ui``; pi-rpc.md §9).

Dialogs (``select``, ``confirm``, ``input``, ``editor``) become ``extension_ui_request``
events on the session's stream and wait for an ``extension_ui_response`` with the same id, which
a client sends back (RPC line, websocket frame, or :meth:`SessionHandle.respond_ui`). On timeout
(or cancellation) a dialog resolves to its default: ``None``, or ``False`` for ``confirm``; a
late reply is ignored. Fire-and-forget calls (``notify``, ``set_status``, ...) are events only.

:class:`NoUI` is what an extension sees where no client can answer (print and JSON modes):
``has_ui`` is false and every dialog returns its default at once.

``set_plan`` is pitrio's (pi 1.6.0's ``ctx.ui`` has no plan): an extension that keeps a plan
(a todo list, a plan mode) shows it to clients as a ``setPlan`` request, which ACP editors
get as a ``plan`` update.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs
import trio

from pitrio.errors import PitrioError
from pitrio.messages.events import ExtensionUiRequest

NotifyType = Literal["info", "warning", "error"]
PlanPriority = Literal["high", "medium", "low"]
PlanStatus = Literal["pending", "in_progress", "completed"]
PLAN_PRIORITIES = ("high", "medium", "low")
PLAN_STATUSES = ("pending", "in_progress", "completed")


class PlanError(PitrioError, ValueError):
    """A plan entry with a wrong content, priority or status."""


@attrs.frozen(kw_only=True)
class PlanEntry:
    """One task of a plan (ACP's ``PlanEntry``): what it is, how important, how far along."""

    content: str
    priority: PlanPriority = "medium"
    status: PlanStatus = "pending"

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise PlanError("a plan entry's content must be a string")
        if self.priority not in PLAN_PRIORITIES:
            raise PlanError(f"a plan entry's priority must be one of {', '.join(PLAN_PRIORITIES)}")
        if self.status not in PLAN_STATUSES:
            raise PlanError(f"a plan entry's status must be one of {', '.join(PLAN_STATUSES)}")

    @classmethod
    def of(cls, entry: PlanEntry | Mapping[str, Any]) -> PlanEntry:
        """An entry, or one from a mapping with the same keys."""
        if isinstance(entry, PlanEntry):
            return entry
        if not isinstance(entry, Mapping):
            raise PlanError("a plan entry must be a PlanEntry or a mapping")
        known = {key: entry[key] for key in ("content", "priority", "status") if key in entry}
        if "content" not in known:
            raise PlanError("a plan entry needs a content")
        return cls(**known)

    def to_json(self) -> dict[str, str]:
        """The entry's JSON (ACP's field names)."""
        return {"content": self.content, "priority": self.priority, "status": self.status}


@attrs.frozen(kw_only=True)
class UiResponse:
    """A client's answer to a dialog: ``value`` (select/input/editor), ``confirmed``
    (confirm), or ``cancelled``."""

    id: str
    value: str | None = None
    confirmed: bool | None = None
    cancelled: bool = False

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> UiResponse:
        """Build from an ``extension_ui_response`` record (wrong-typed fields are dropped)."""
        value = record.get("value")
        confirmed = record.get("confirmed")
        return cls(
            id=str(record.get("id", "")),
            value=value if isinstance(value, str) else None,
            confirmed=confirmed if isinstance(confirmed, bool) else None,
            cancelled=record.get("cancelled") is True,
        )


class ExtensionUI(Protocol):
    """What ``ctx.ui`` offers."""

    has_ui: bool

    async def select(
        self, title: str, options: Sequence[str], *, time_limit: float | None = None
    ) -> str | None: ...

    async def confirm(
        self, title: str, message: str, *, time_limit: float | None = None
    ) -> bool: ...

    async def input(
        self, title: str, placeholder: str | None = None, *, time_limit: float | None = None
    ) -> str | None: ...

    async def editor(self, title: str, prefill: str | None = None) -> str | None: ...

    async def notify(self, message: str, notify_type: NotifyType | None = None) -> None: ...

    async def set_status(self, key: str, text: str | None = None) -> None: ...

    async def set_widget(
        self, key: str, lines: Sequence[str] | None = None, placement: str | None = None
    ) -> None: ...

    async def set_title(self, title: str) -> None: ...

    async def set_editor_text(self, text: str) -> None: ...

    async def set_plan(self, entries: Sequence[PlanEntry | Mapping[str, Any]]) -> None: ...


class NoUI:
    """No client can answer: dialogs return their defaults, the rest does nothing."""

    has_ui = False

    async def select(
        self, title: str, options: Sequence[str], *, time_limit: float | None = None
    ) -> str | None:
        """No choice: ``None``."""
        await trio.lowlevel.checkpoint()
        return None

    async def confirm(self, title: str, message: str, *, time_limit: float | None = None) -> bool:
        """Not confirmed."""
        await trio.lowlevel.checkpoint()
        return False

    async def input(
        self, title: str, placeholder: str | None = None, *, time_limit: float | None = None
    ) -> str | None:
        """No text: ``None``."""
        await trio.lowlevel.checkpoint()
        return None

    async def editor(self, title: str, prefill: str | None = None) -> str | None:
        """No text: ``None``."""
        await trio.lowlevel.checkpoint()
        return None

    async def notify(self, message: str, notify_type: NotifyType | None = None) -> None:
        """Nothing to show it on."""
        await trio.lowlevel.checkpoint()

    async def set_status(self, key: str, text: str | None = None) -> None:
        """Nothing to show it on."""
        await trio.lowlevel.checkpoint()

    async def set_widget(
        self, key: str, lines: Sequence[str] | None = None, placement: str | None = None
    ) -> None:
        """Nothing to show it on."""
        await trio.lowlevel.checkpoint()

    async def set_title(self, title: str) -> None:
        """Nothing to show it on."""
        await trio.lowlevel.checkpoint()

    async def set_editor_text(self, text: str) -> None:
        """Nothing to show it on."""
        await trio.lowlevel.checkpoint()

    async def set_plan(self, entries: Sequence[PlanEntry | Mapping[str, Any]]) -> None:
        """Nothing to show it on (the entries are still checked)."""
        for entry in entries:
            PlanEntry.of(entry)
        await trio.lowlevel.checkpoint()


Ask = Callable[[ExtensionUiRequest, float | None], Awaitable[UiResponse | None]]
"""Emit a dialog request and wait for its answer (``None``: timed out or cancelled)."""
Tell = Callable[[ExtensionUiRequest], Awaitable[None]]
"""Emit a fire-and-forget request."""


def _timeout_ms(timeout: float | None) -> int | None:
    return None if timeout is None else int(timeout * 1000)


class ClientUI:
    """Dialogs answered by the session's clients through request/response events."""

    has_ui = True

    def __init__(self, ask: Ask, tell: Tell) -> None:
        self._ask = ask
        self._tell = tell

    @staticmethod
    def _id() -> str:
        raw = secrets.token_hex(16)
        return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"

    async def select(
        self, title: str, options: Sequence[str], *, time_limit: float | None = None
    ) -> str | None:
        """Ask the client to choose one of ``options``; ``None`` if cancelled or timed out."""
        request = ExtensionUiRequest(
            id=self._id(),
            method="select",
            title=title,
            options=tuple(options),
            timeout=_timeout_ms(time_limit),
        )
        answer = await self._ask(request, time_limit)
        return None if answer is None or answer.cancelled else answer.value

    async def confirm(self, title: str, message: str, *, time_limit: float | None = None) -> bool:
        """Ask a yes/no question; ``False`` if cancelled, timed out or answered wrongly."""
        request = ExtensionUiRequest(
            id=self._id(),
            method="confirm",
            title=title,
            message=message,
            timeout=_timeout_ms(time_limit),
        )
        answer = await self._ask(request, time_limit)
        if answer is None or answer.cancelled:
            return False
        return answer.confirmed is True

    async def input(
        self, title: str, placeholder: str | None = None, *, time_limit: float | None = None
    ) -> str | None:
        """Ask for a line of text; ``None`` if cancelled or timed out."""
        request = ExtensionUiRequest(
            id=self._id(),
            method="input",
            title=title,
            placeholder=placeholder,
            timeout=_timeout_ms(time_limit),
        )
        answer = await self._ask(request, time_limit)
        return None if answer is None or answer.cancelled else answer.value

    async def editor(self, title: str, prefill: str | None = None) -> str | None:
        """Ask for a longer text (no timeout, as in pi)."""
        request = ExtensionUiRequest(id=self._id(), method="editor", title=title, prefill=prefill)
        answer = await self._ask(request, None)
        return None if answer is None or answer.cancelled else answer.value

    async def notify(self, message: str, notify_type: NotifyType | None = None) -> None:
        """Show a message."""
        await self._tell(
            ExtensionUiRequest(
                id=self._id(), method="notify", message=message, notify_type=notify_type
            )
        )

    async def set_status(self, key: str, text: str | None = None) -> None:
        """Set (or clear, with ``None``) a status line."""
        await self._tell(
            ExtensionUiRequest(id=self._id(), method="setStatus", status_key=key, status_text=text)
        )

    async def set_widget(
        self, key: str, lines: Sequence[str] | None = None, placement: str | None = None
    ) -> None:
        """Set (or clear, with ``None``) a block of lines around the editor."""
        await self._tell(
            ExtensionUiRequest(
                id=self._id(),
                method="setWidget",
                widget_key=key,
                widget_lines=None if lines is None else tuple(lines),
                widget_placement=placement,
            )
        )

    async def set_title(self, title: str) -> None:
        """Set the client's title."""
        await self._tell(ExtensionUiRequest(id=self._id(), method="setTitle", title=title))

    async def set_editor_text(self, text: str) -> None:
        """Put text into the client's editor."""
        await self._tell(ExtensionUiRequest(id=self._id(), method="set_editor_text", text=text))

    async def set_plan(self, entries: Sequence[PlanEntry | Mapping[str, Any]]) -> None:
        """Show the whole plan (replacing the one shown; ``[]`` clears it). Raises
        :class:`PlanError` for a wrong entry."""
        plan = tuple(PlanEntry.of(entry).to_json() for entry in entries)
        await self._tell(ExtensionUiRequest(id=self._id(), method="setPlan", plan_entries=plan))
