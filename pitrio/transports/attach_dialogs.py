"""Extension dialogs in ``pitrio attach``, without any I/O.

An ``extension_ui_request`` for ``select``, ``confirm``, ``input`` or ``editor`` opens a
:class:`Dialog`; while one is open the lines typed answer it instead of becoming prompts.
:class:`Dialogs` keeps them in order of arrival (one question at a time; the next one is asked
when the current one closes), forgets none it has seen (a replay after a reconnect does not ask
again), and closes those whose ``timeout`` passed: the extension has taken its default by then,
so nothing is sent, the user is told. The clock is a parameter: ``now`` in seconds.

Answers: ``confirm`` takes y/yes/n/no; ``select`` a number or an option's text; ``input`` the
line as typed; ``editor`` the lines up to one holding only ``.`` (``.`` at once keeps the text
shown). Cancelling (Ctrl-C, end of input) replies ``cancelled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from pitrio.transports.attach_render import Style, seconds

DIALOG_METHODS = ("select", "confirm", "input", "editor")
EDITOR_END = "."


@attrs.frozen
class Step:
    """The outcome of a line typed into a dialog: a ``reply`` to send (the dialog closes), or
    ``None`` with ``text`` to show (a hint to answer again, or nothing while an editor reads)."""

    reply: dict[str, Any] | None = None
    text: str = ""


@attrs.define
class Dialog:
    """One open question of an extension."""

    id: str
    method: str
    title: str
    message: str = ""
    options: tuple[str, ...] = ()
    placeholder: str = ""
    prefill: str = ""
    timeout_ms: int | None = None
    deadline: float | None = None
    lines: list[str] = attrs.field(factory=list)

    @classmethod
    def from_frame(cls, frame: Mapping[str, Any], now: float) -> Dialog:
        """The dialog an ``extension_ui_request`` frame asks for."""
        timeout = frame.get("timeout")
        timeout_ms = timeout if isinstance(timeout, int) and timeout > 0 else None
        options = frame.get("options")
        return cls(
            id=str(frame.get("id")),
            method=str(frame.get("method")),
            title=str(frame.get("title") or ""),
            message=str(frame.get("message") or ""),
            options=tuple(str(o) for o in options) if isinstance(options, list) else (),
            placeholder=str(frame.get("placeholder") or ""),
            prefill=str(frame.get("prefill") or ""),
            timeout_ms=timeout_ms,
            deadline=None if timeout_ms is None else now + timeout_ms / 1000,
        )

    def _reply(self, **fields: Any) -> dict[str, Any]:
        return {"type": "extension_ui_response", "id": self.id, **fields}

    def cancel(self) -> dict[str, Any]:
        """The reply that cancels the dialog (the extension gets its default)."""
        return self._reply(cancelled=True)

    def question(self, style: Style, *, external_editor: bool = False) -> str:
        """What the terminal shows when the dialog opens (the last line awaits the answer)."""
        limit = f" (answer within {seconds(self.timeout_ms)})" if self.timeout_ms else ""
        head = style.bold(f"? {self.title}") + limit + "\n"
        if self.message:
            head += "".join(f"  {line}\n" for line in self.message.splitlines())
        if self.method == "confirm":
            return head + "  [y/n] "
        if self.method == "select":
            listed = "".join(f"  {n}) {o}\n" for n, o in enumerate(self.options, 1))
            return head + listed + f"  choose 1-{len(self.options)}: "
        if self.method == "input":
            hint = f" ({self.placeholder})" if self.placeholder else ""
            return head + f"  answer{hint}: "
        if external_editor:
            return head + "  (opening $EDITOR; save and quit to answer)\n"
        shown = "".join(f"  | {line}\n" for line in self.prefill.splitlines())
        keep = ' ("." at once keeps the text above)' if self.prefill else ""
        return head + shown + f'  type the text, then a line holding only "."{keep}\n'

    def answer(self, line: str) -> Step:
        """Take one line typed by the user."""
        if self.method == "editor":
            if line != EDITOR_END:
                self.lines.append(line)
                return Step()
            value = "\n".join(self.lines) if self.lines else self.prefill
            return Step(self._reply(value=value))
        if self.method == "input":
            return Step(self._reply(value=line))
        text = line.strip()
        if self.method == "confirm":
            if text.lower() in ("y", "yes"):
                return Step(self._reply(confirmed=True))
            if text.lower() in ("n", "no"):
                return Step(self._reply(confirmed=False))
            return Step(text="  answer y or n: ")
        if text.isdigit() and 1 <= int(text) <= len(self.options):
            return Step(self._reply(value=self.options[int(text) - 1]))
        matches = [o for o in self.options if o.lower() == text.lower()]
        if len(matches) == 1:
            return Step(self._reply(value=matches[0]))
        return Step(text=f"  choose a number from 1 to {len(self.options)}: ")

    def edited(self, text: str | None) -> dict[str, Any]:
        """The reply once an external editor is done (``None``: it failed, the dialog is
        cancelled); the trailing newline editors add is dropped."""
        if text is None:
            return self.cancel()
        return self._reply(value=text[:-1] if text.endswith("\n") else text)


@attrs.define
class Dialogs:
    """The dialogs of one session as this client sees them, oldest first."""

    style: Style = attrs.field(factory=Style)
    external_editor: bool = False
    waiting: list[Dialog] = attrs.field(factory=list)
    seen: set[str] = attrs.field(factory=set)

    @property
    def current(self) -> Dialog | None:
        """The dialog the next line answers."""
        return self.waiting[0] if self.waiting else None

    def _ask_current(self) -> str:
        current = self.current
        if current is None:
            return ""
        return current.question(self.style, external_editor=self._external(current))

    def _external(self, dialog: Dialog) -> bool:
        return self.external_editor and dialog.method == "editor"

    def wants_editor(self) -> bool:
        """Whether the open dialog is to be answered in ``$EDITOR``."""
        return self.current is not None and self._external(self.current)

    def offer(self, frame: Mapping[str, Any], now: float) -> str:
        """Take an ``extension_ui_request``; the text to show (empty: not a dialog, seen
        already, or queued behind the open one)."""
        if frame.get("method") not in DIALOG_METHODS or str(frame.get("id")) in self.seen:
            return ""
        dialog = Dialog.from_frame(frame, now)
        self.seen.add(dialog.id)
        self.waiting.append(dialog)
        return self._ask_current() if len(self.waiting) == 1 else ""

    def _close(self) -> str:
        self.waiting.pop(0)
        return self._ask_current()

    def answer(self, line: str) -> tuple[dict[str, Any] | None, str]:
        """A line typed while a dialog is open: the reply to send (if any) and what to show."""
        current = self.current
        if current is None:
            return None, ""
        step = current.answer(line)
        if step.reply is None:
            return None, step.text
        return step.reply, self._close()

    def edited(self, text: str | None) -> tuple[dict[str, Any] | None, str]:
        """The external editor closed with ``text`` (``None``: it failed)."""
        current = self.current
        if current is None:
            return None, ""
        reply = current.edited(text)
        told = "" if text is not None else self.style.dim("(the editor failed: cancelled)") + "\n"
        return reply, told + self._close()

    def cancel(self) -> tuple[dict[str, Any] | None, str]:
        """Cancel the open dialog (Ctrl-C, end of input)."""
        current = self.current
        if current is None:
            return None, ""
        return current.cancel(), "\n" + self.style.dim(
            f"(cancelled: {current.title})"
        ) + "\n" + self._close()

    def answered_elsewhere(self, dialog_id: str) -> str:
        """Another client of the session answered ``dialog_id`` (the daemon's
        ``extension_ui_answered``): close it here too; what to tell the user (empty when this
        client had already closed it, e.g. by answering it itself)."""
        for dialog in self.waiting:
            if dialog.id == dialog_id:
                break
        else:
            return ""
        was_current = dialog is self.current
        self.waiting.remove(dialog)
        note = self.style.dim(f"(answered elsewhere: “{dialog.title}”)") + "\n"
        return ("\n" if was_current else "") + note + (self._ask_current() if was_current else "")

    def next_deadline(self) -> float | None:
        """When the first of the open dialogs' time limits runs out."""
        deadlines = [d.deadline for d in self.waiting if d.deadline is not None]
        return min(deadlines) if deadlines else None

    def expire(self, now: float) -> str:
        """Close the dialogs whose time ran out; what to tell the user."""
        current = self.current
        told = ""
        for dialog in list(self.waiting):
            if dialog.deadline is None or dialog.deadline > now:
                continue
            self.waiting.remove(dialog)
            limit = seconds(dialog.timeout_ms)
            note = f"(no answer within {limit}: “{dialog.title}” was cancelled)"
            told += ("\n" if dialog is current else "") + self.style.dim(note) + "\n"
        if self.current is not current:
            told += self._ask_current()
        return told
