"""``pitrio attach [SESSION]``: a terminal client of the daemon.

Connects to ``/v1/sessions/{id}`` (a new session when none is named) and works like a plain
chat: ``> `` asks for a prompt when the session is idle; the reply streams to stdout (thinking
dimmed, tool calls with their arguments and the tail of their output, retry and compaction
notices); an extension's question is asked in the terminal and the next lines answer it. While a
reply streams, Enter queues the line as a steering message (``--follow-up``: as a follow-up);
Ctrl-C cancels an open question, else aborts the run, else exits; end of input waits for the run
to settle and exits. A dropped connection is resumed from the last ``seq`` seen (a few tries,
then exit 1). What is shown is :mod:`attach_render` and :mod:`attach_dialogs`; where the daemon
is and the error texts are :mod:`attach_connect`; this module is the I/O around them.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Sequence
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from pitrio.transports.attach_connect import (
    closed_reason,
    daemon_token,
    daemon_url,
    refused,
    unreachable,
    unreachable_reason,
    ws_url,
)
from pitrio.transports.attach_dialogs import Dialogs
from pitrio.transports.attach_render import Renderer, choose_style
from pitrio.transports.attach_state import RunState
from pitrio.transports.attach_terminal import Keyboard, Terminal, edit_in

RECONNECTS = 5
PROMPT = "> "


class AttachError(Exception):
    """A failure told to the user as one line, exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``pitrio attach``."""
    parser = argparse.ArgumentParser(
        prog="pitrio attach", description="Chat with a session of a running pitrio daemon."
    )
    parser.add_argument("session", nargs="?", help="session id (default: a new session)")
    parser.add_argument("--url", help="the daemon's address (default: the running daemon's)")
    parser.add_argument("--token", help="the daemon token (default: the agent dir's)")
    parser.add_argument("--model", help="model of a new session")
    parser.add_argument(
        "--follow-up",
        action="store_true",
        help="Enter while a reply streams queues a follow-up instead of steering",
    )
    return parser


class AttachClient:
    """The connection, the terminal and the keyboard."""

    def __init__(self, args: argparse.Namespace, term: Terminal, keys: Keyboard) -> None:
        self.args, self.term, self.keys = args, term, keys
        self.base = daemon_url(args.url)
        self.token = daemon_token(args.token)
        value = self.token.value
        self.headers = [(b"Authorization", f"Bearer {value}".encode())] if value else []
        self.interactive = term.tty and os.isatty(keys.fd)
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        self.editor = editor if self.interactive else None
        self.dialogs = Dialogs(term.renderer.style, external_editor=bool(self.editor))
        self.dialogs_changed = trio.Event()
        self.ws: WebSocketConnection | None = None
        self.state = RunState()
        self.idle = trio.Event()
        self.ids = 0
        # A session remembers the ids its commands carried (exactly-once commands, issue 36):
        # ids unique to this process, so a later attach's "a1" is never taken for this one's.
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

    async def send(self, command: dict[str, Any]) -> str:
        """Send a command with a fresh id (returned); ``ConnectionClosed`` when not connected."""
        self.ids += 1
        command = {"id": f"{self.id_prefix}{self.ids}", **command}
        if self.ws is None:
            raise ConnectionClosed(None)
        await self.ws.send_message(json.dumps(command))
        return str(command["id"])

    # -- connection --------------------------------------------------------------------------

    def _open(self, path: str) -> Any:
        return open_websocket_url(ws_url(self.base, path), extra_headers=self.headers)

    async def create_session(self) -> str:
        """Create a session through ``/v1/host``: its id. On a terminal the daemon's
        project-trust question is answered here (a numbered choice, read as one line)."""
        fields: dict[str, Any] = {"model": self.args.model} if self.args.model else {}
        if self.interactive:
            fields["trustDialog"] = True
        async with self._open("/v1/host") as host:
            await host.send_message(json.dumps({"id": "create", "type": "create", **fields}))
            while True:
                frame = json.loads(await host.get_message())
                if frame.get("type") == "project_trust_request":
                    answer = {"type": "project_trust_response", "id": frame.get("id")}
                    value = await self._choose(str(frame.get("title", "")), frame.get("options"))
                    await host.send_message(json.dumps({**answer, "value": value}))
                    continue
                if frame.get("type") == "response" and frame.get("id") == "create":
                    if not frame["success"]:
                        raise AttachError(f"could not create a session: {frame['error']}")
                    session_id: str = frame["data"]["sessionId"]
                    return session_id

    async def _choose(self, title: str, options: Any) -> str | None:
        """``options`` numbered under ``title``; the label of the number typed, ``None`` for
        an empty line or the end of input."""
        labels = [str(option) for option in options] if isinstance(options, list) else []
        self.term.text(title + "\n" + "".join(f"  {i}. {o}\n" for i, o in enumerate(labels, 1)))
        while True:
            self.term.text(f"Select 1-{len(labels)} (Enter: do not trust this time): ")
            line = await self.keys.readline()
            if line is None or not line.strip():
                return None
            if line.strip().isdigit() and 1 <= int(line) <= len(labels):
                return labels[int(line) - 1]
            self.term.text(f"Enter a number from 1 to {len(labels)}.\n")

    async def run(self) -> int:
        """Attach until the end: the exit code (``AttachError`` for a failure to tell)."""
        try:
            session_id = self.args.session or await self.create_session()
        except ConnectionRejected as exc:
            raise AttachError(refused(exc.status_code, exc.body, self.token, "the daemon")) from exc
        except (HandshakeError, OSError, ConnectionClosed) as exc:
            raise AttachError(unreachable(self.base, exc)) from exc
        code = 0  # Ctrl-C when idle cancels everything: a plain exit
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._signals, nursery)
            nursery.start_soon(self._keyboard)
            nursery.start_soon(self._dialog_timer)
            try:
                code = await self._connection(f"/v1/sessions/{session_id}")
            except AttachError as exc:
                self.failure, code = exc, 1
            nursery.cancel_scope.cancel()
        if self.failure is not None:
            raise self.failure
        return code

    async def _connection(self, path: str) -> int:
        """Receive until the end; reconnect with resume after a loss (a few times)."""
        failures, connected, reason = 0, False, ""
        while failures <= RECONNECTS:
            state = self.state
            query = f"?since={state.last_seq}&stream={state.stream}" if state.stream else ""
            try:
                async with self._open(path + query) as ws:
                    self.ws, connected = ws, True
                    first = await ws.get_message()  # the `attached` frame: really back
                    failures = 0
                    return await self._receive(ws, first)
            except ConnectionRejected as exc:
                what = f"session {path.rsplit('/', 1)[-1]}"
                raise AttachError(refused(exc.status_code, exc.body, self.token, what)) from exc
            except (ConnectionClosed, HandshakeError, OSError) as exc:
                self.ws = None
                if not connected:
                    raise AttachError(unreachable(self.base, exc)) from exc
                if self.input_done and not self.busy:
                    return 0
                failures += 1
                reason = closed_reason(exc)
                if failures <= RECONNECTS:
                    self.term.error(
                        f"(connection to the daemon lost: {reason}; reconnecting,"
                        f" try {failures}/{RECONNECTS})"
                    )
                    await trio.sleep(0.2 * failures)
        raise AttachError(
            f"lost the connection to the daemon at {self.base}: {reason}"
            " — is `pitrio serve` still running?"
        )

    async def _receive(self, ws: WebSocketConnection, first: str | bytes) -> int:
        message: str | bytes | None = first
        while True:
            try:
                frame = json.loads(message if message is not None else await ws.get_message())
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
                command, self.state.resend = self.state.resend, None
                await ws.send_message(json.dumps(command))  # the same id: applied once
            if self.state.probe:
                self.state.sent(await self.send({"type": "get_state"}))
            while self.input_done and self.dialogs.current is not None:
                await self._reply(*self.dialogs.cancel())  # nobody is left to answer
            if self.input_done and not self.busy and self.dialogs.current is None:
                return 0

    def _frame(self, frame: dict[str, Any]) -> None:
        self.state.feed(frame)
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
                if self.ws is None:
                    raise ConnectionClosed(None)
                await self.ws.send_message(json.dumps(reply))
            except ConnectionClosed:
                self.term.error("(not connected: the answer was not sent)")
        self._changed()

    # -- keyboard, signals, timers -----------------------------------------------------------

    async def _keyboard(self) -> None:
        while True:
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
            await self._line(line)

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
        try:
            if self.busy:
                await self.send(
                    {"type": "follow_up" if self.args.follow_up else "steer", "message": line}
                )
            else:
                prompt = {"type": "prompt", "message": line}
                request_id = await self.send(prompt)
                self.state.sent(request_id, {"id": request_id, **prompt})
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
        if self.ws is not None:
            await self.ws.aclose()

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

    async def _signals(self, nursery: trio.Nursery) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self.dialogs.current is not None:
                    await self._reply(*self.dialogs.cancel())
                elif self.busy and self.ws is not None:
                    self.term.error("(aborting)")
                    try:
                        await self.send({"type": "abort"})
                    except ConnectionClosed:
                        nursery.cancel_scope.cancel()
                else:
                    nursery.cancel_scope.cancel()
                    return


def attach_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio attach``; returns the exit code."""
    args = build_parser().parse_args(list(argv))
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    tty = sys.stdout.isatty()
    style = choose_style(tty=tty, env=os.environ, width=shutil.get_terminal_size().columns)
    term = Terminal(sys.stdout, sys.stderr, Renderer(style), tty)
    client = AttachClient(args, term, Keyboard(sys.stdin.fileno()))
    try:
        return trio.run(client.run)
    except AttachError as exc:
        term.error(f"Error: {exc}")
        return 1
