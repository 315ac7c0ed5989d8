"""The screen of a terminal chat with one session: what ``pitrio attach`` and ``pitrio``'s
terminal chat share, over any :class:`Link` that carries the session socket's frames.

``> `` asks for a prompt when the session is idle; the reply streams to stdout (thinking
dimmed, tool calls with their arguments and the tail of their output, retry and compaction
notices); an extension's question is asked in the terminal and the next lines answer it. While a
reply streams, Enter queues the line as a steering message (``follow_up``: as a follow-up);
Ctrl-C (or Esc on a terminal) cancels an open question, else aborts the run; Ctrl-C when idle
exits; end of input waits for the run to settle and exits. What is shown is
:mod:`attach_render` and :mod:`attach_dialogs`; this module is the I/O around them. Where the
frames come from is the subclass's part: a daemon's websocket (:mod:`attach`) or a session run
in this process (:mod:`chat`).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio
from trio_websocket import ConnectionClosed

from pitrio.transports.attach_connect import unreachable_reason
from pitrio.transports.attach_dialogs import Dialogs
from pitrio.transports.attach_state import RunState
from pitrio.transports.attach_terminal import ESC, Keyboard, Terminal, edit_in

PROMPT = "> "


class AttachError(Exception):
    """A failure told to the user as one line, exit code 1."""


class Link(Protocol):
    """A connection carrying one session's frames (a ``trio_websocket`` connection is one).

    Its end is told by raising :class:`trio_websocket.ConnectionClosed`."""

    async def send_message(self, message: str) -> None:
        """Send one command (a JSON object)."""

    async def get_message(self) -> str | bytes:
        """The next frame (a JSON object)."""

    async def aclose(self) -> None:
        """End the connection: no more commands."""


class ChatScreen:
    """The terminal, the keyboard and the state of one session as its frames tell it."""

    def __init__(self, term: Terminal, keys: Keyboard, *, follow_up: bool = False) -> None:
        self.term, self.keys, self.follow_up = term, keys, follow_up
        self.interactive = term.tty and os.isatty(keys.fd)
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        self.editor = editor if self.interactive else None
        self.dialogs = Dialogs(term.renderer.style, external_editor=bool(self.editor))
        self.dialogs_changed = trio.Event()
        self.link: Link | None = None
        self.state = RunState()
        self.idle = trio.Event()
        self.ids = 0
        # A daemon's session remembers the ids its commands carried (exactly-once commands,
        # issue 36): ids unique to this process, so a later client's "a1" is never taken for
        # this one's.
        self.id_prefix = "a" + secrets.token_hex(4) + "-"
        self.input_done = False
        self.asking = False  # a marker or a question awaits a line on stdout
        self.read_scope: trio.CancelScope | None = None
        self.failure: AttachError | None = None

    # -- state -------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a run or a prompt of ours is in flight (see :class:`RunState`)."""
        return self.state.busy

    def _changed(self) -> None:
        """After any change of run or dialog state: the idle event and the prompt marker."""
        if self.busy:
            if self.idle.is_set():
                self.idle = trio.Event()
            return
        self.idle.set()
        if not self.input_done and self.dialogs.current is None and not self.asking:
            self.asking = True
            self.term.text(("" if self.term.renderer.at_line_start else "\n") + PROMPT)

    def next_id(self) -> str:
        """A fresh command id (to know a response by before the command is sent)."""
        self.ids += 1
        return f"{self.id_prefix}{self.ids}"

    async def send(self, command: dict[str, Any], request_id: str | None = None) -> str:
        """Send a command with ``request_id`` (default: a fresh one), returned;
        ``ConnectionClosed`` when not connected."""
        command = {"id": request_id or self.next_id(), **command}
        if self.link is None:
            raise ConnectionClosed(None)
        await self.link.send_message(json.dumps(command))
        return str(command["id"])

    async def send_awaited(self, command: dict[str, Any]) -> None:
        """Send a command whose response the run state waits for (a prompt): it is counted
        before it leaves, so a response that comes at once is never missed."""
        request_id = self.next_id()
        self.state.sent(request_id, {"id": request_id, **command})  # to resend, see receive
        try:
            await self.send(command, request_id)
        except ConnectionClosed:
            if self.state.pending == request_id:
                self.state.pending = None  # never sent: nothing to wait for
            raise

    async def choose(self, title: str, options: Any) -> str | None:
        """``options`` numbered under ``title``; the label of the number typed, ``None`` for
        an empty line or the end of input (the project-trust question)."""
        labels = [str(option) for option in options] if isinstance(options, list) else []
        self.term.text(title + "\n" + "".join(f"  {i}. {o}\n" for i, o in enumerate(labels, 1)))
        while True:
            self.term.text(f"Select 1-{len(labels)} (Enter: do not trust this time): ")
            line = await self.keys.readline()
            if line is None or not line.strip().rstrip(ESC):
                return None
            line = line.strip().rstrip(ESC)
            if line.isdigit() and 1 <= int(line) <= len(labels):
                return labels[int(line) - 1]
            self.term.text(f"Enter a number from 1 to {len(labels)}.\n")

    # -- the session -------------------------------------------------------------------------

    async def screen(self, connection: Callable[[], Awaitable[int]]) -> int:
        """Run the keyboard, Ctrl-C and dialog timers around ``connection`` (which receives
        frames until the end): the exit code (``AttachError`` for a failure to tell)."""
        code = 0  # Ctrl-C when idle cancels everything: a plain exit
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._signals, nursery)
            nursery.start_soon(self._keyboard)
            nursery.start_soon(self._dialog_timer)
            try:
                code = await connection()
            except AttachError as exc:
                self.failure, code = exc, 1
            nursery.cancel_scope.cancel()
        if self.failure is not None:
            raise self.failure
        return code

    async def receive(self, link: Link, first: str | bytes | None) -> int:
        """Take frames from ``link`` (``first`` already read) until the end: the exit code.

        ``ConnectionClosed`` escapes when the link ends while the session still needs it."""
        message: str | bytes | None = first
        while True:
            try:
                frame = json.loads(message if message is not None else await link.get_message())
                message = None
            except ConnectionClosed as exc:
                code = exc.reason.code if exc.reason is not None else None
                if self.input_done and not self.busy:
                    return 0
                if code in (1000, 1008):
                    told = exc.reason.reason if exc.reason is not None else ""
                    self.term.error(f"Error: the daemon closed the session: {code} {told or ''}")
                    return 1
                raise
            self._frame(frame)
            if self.state.resend is not None:
                # Its answer went down with the old connection: the same id again, so the
                # daemon runs it if it never arrived and only answers it if it did.
                command, self.state.resend = self.state.resend, None
                await link.send_message(json.dumps(command))
            if self.state.probe:
                self.state.sent(await self.send({"type": "get_state"}))
            while self.input_done and self.dialogs.current is not None:
                await self._reply(*self.dialogs.cancel())  # nobody is left to answer
            if self.input_done and not self.busy and self.dialogs.current is None:
                return 0

    def _frame(self, frame: dict[str, Any]) -> None:
        self.state.feed(frame)
        if self.own_response(frame):
            self._changed()
            return
        chunks = self.term.renderer.feed(frame)
        if chunks and self.asking:  # output arrived after the marker: it no longer asks
            self.asking = False
        if frame.get("type") == "extension_ui_answered":
            told = self.dialogs.answered_elsewhere(str(frame.get("id")))
            if told:
                self.term.show(chunks)
                self.term.text(told)
                self._dialogs_moved()
                return
        if frame.get("type") == "extension_ui_request":
            asked = self.dialogs.offer(frame, trio.current_time())
            if asked:
                self.term.show([*chunks, *self.term.renderer.newline()])
                self.term.text(asked)
                self.asking = False
                self._dialogs_moved()
                return
        self.term.show(chunks)
        self._changed()

    def own_response(self, frame: dict[str, Any]) -> bool:
        """A subclass's hook: whether ``frame`` answers a command of its own (then it is
        not rendered; it was shown by the hook)."""
        return False

    def _dialogs_moved(self) -> None:
        self.dialogs_changed.set()
        self.dialogs_changed = trio.Event()
        if self.dialogs.wants_editor() and self.read_scope is not None:
            self.read_scope.cancel()

    async def _reply(self, reply: dict[str, Any] | None, told: str) -> None:
        if told:
            self.term.text(told)
        self._dialogs_moved()
        if reply is not None:
            try:
                if self.link is None:
                    raise ConnectionClosed(None)
                await self.link.send_message(json.dumps(reply))
            except ConnectionClosed:
                self.term.error("(not connected: the answer was not sent)")
        self._changed()

    # -- keyboard, signals, timers -----------------------------------------------------------

    async def _keyboard(self) -> None:
        while not self.input_done:
            if self.dialogs.wants_editor():
                await self._reply(*self.dialogs.edited(await self._edit()))
                continue
            with trio.CancelScope() as scope:
                self.read_scope = scope
                line = await self.keys.readline()
            self.read_scope = None
            if scope.cancelled_caught:
                continue
            if line is None:
                await self._end_of_input()
                return
            if line.endswith(ESC):
                await self._escape()
                continue
            await self._line(line)

    async def command(self, line: str) -> bool:
        """A subclass's hook for a line typed while idle: whether it was a command of the
        client's own (then it is not sent as a prompt)."""
        return False

    async def _line(self, line: str) -> None:
        if self.interactive:
            self.term.renderer.at_line_start = True  # the terminal echoed the Enter
        elif self.asking or self.dialogs.current is not None:
            self.term.text(line + "\n")
        self.asking = False
        if self.dialogs.current is not None:
            await self._reply(*self.dialogs.answer(line))
            return
        if not line.strip():
            self._changed()
            return
        self.keys.remember(line)
        try:
            if self.busy:
                kind = "follow_up" if self.follow_up else "steer"
                await self.send({"type": kind, "message": line})
            elif not await self.command(line):
                await self.send_awaited({"type": "prompt", "message": line})
                self._changed()
        except ConnectionClosed:
            self.term.error("(not connected: the line was dropped)")

    async def _end_of_input(self) -> None:
        self.input_done = True
        while self.dialogs.current is not None:
            await self._reply(*self.dialogs.cancel())
        if self.asking:
            self.term.text("\n")
        await self.idle.wait()
        if self.link is not None:
            await self.link.aclose()

    async def _edit(self) -> str | None:
        """Answer the open editor dialog in ``$EDITOR``: its text, ``None`` when it failed."""
        dialog = self.dialogs.current
        assert dialog is not None and self.editor is not None
        self.term.show([])
        try:
            text = await edit_in(self.editor, dialog.prefill)
        except OSError as exc:
            self.term.error(f"(cannot run the editor {self.editor!r}: {unreachable_reason(exc)})")
            return None
        self.term.renderer.at_line_start = True
        return text

    async def _dialog_timer(self) -> None:
        while True:
            changed = self.dialogs_changed
            deadline = self.dialogs.next_deadline()
            with trio.move_on_at(deadline if deadline is not None else float("inf")):
                await changed.wait()
                continue
            told = self.dialogs.expire(trio.current_time())
            await self._reply(None, told)

    async def _interrupt(self) -> bool:
        """Ctrl-C or Esc: cancel the open question, else abort the run; ``False`` when there
        was neither (or the abort could not be sent)."""
        if self.dialogs.current is not None:
            await self._reply(*self.dialogs.cancel())
            return True
        if self.busy and self.link is not None:
            self.term.error("(aborting)")
            try:
                await self.send({"type": "abort"})
            except ConnectionClosed:
                return False
            return True
        return False

    async def _escape(self) -> None:
        """Esc (the terminal ends the line there): interrupt; what was typed before it on
        that line is dropped, as an editor's Esc would."""
        self.term.renderer.at_line_start = False  # the echoed "^[" ends no line
        if not await self._interrupt():
            self.asking = False
            self._changed()

    async def _signals(self, nursery: trio.Nursery) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if not await self._interrupt():
                    nursery.cancel_scope.cancel()
                    return
