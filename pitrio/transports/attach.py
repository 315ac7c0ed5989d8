"""``pitrio attach [SESSION]``: a terminal client of the daemon.

Connects to ``/v1/sessions/{id}`` (a new session when none is named) and works like a plain
chat: each line typed is a prompt; the reply streams to stdout (thinking dimmed, tool calls
with a spinner while they run). While a reply streams, Enter queues the line as a steering
message (``--follow-up``: as a follow-up); Ctrl-C aborts the run (and exits when idle); end of
input waits for the run to settle and exits. A dropped connection is resumed from the last
``seq`` seen.

The daemon is found through ``--url``, ``$PITRIO_DAEMON_URL``, the ``daemon.json`` a running
``pitrio serve`` writes into the agent dir, else ``http://127.0.0.1:8321/``; the token through
``--token``, ``$PITRIO_DAEMON_TOKEN`` or the agent dir's ``daemon-token``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from pitrio.sdk.store import agent_dir as default_agent_dir
from pitrio.transports.daemon.security import token_path

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
RECONNECTS = 5


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


def daemon_url(explicit: str | None) -> str:
    """Where the daemon is (``http://host:port/``)."""
    if explicit:
        return explicit
    if env := os.environ.get("PITRIO_DAEMON_URL"):
        return env
    from pitrio.transports.serve import read_state

    state = read_state(default_agent_dir())
    url = state.get("url") if state else None
    return url if isinstance(url, str) else "http://127.0.0.1:8321/"


def daemon_token(explicit: str | None) -> str | None:
    """The token to present (``None``: the daemon runs without one)."""
    if explicit:
        return explicit
    if env := os.environ.get("PITRIO_DAEMON_TOKEN"):
        return env
    try:
        return token_path(default_agent_dir()).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def ws_url(base: str, path: str) -> str:
    """``http://h:p/`` + ``/v1/host`` → ``ws://h:p/v1/host``."""
    root = base.rstrip("/")
    if root.startswith("https://"):
        root = "wss://" + root[len("https://") :]
    elif root.startswith("http://"):
        root = "ws://" + root[len("http://") :]
    return root + path


class Terminal:
    """What the user sees: streamed text, dimmed thinking, tool calls with a spinner."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.tty = out.isatty()
        self.running_tools: dict[str, str] = {}
        self.at_line_start = True

    def write(self, text: str, *, dim: bool = False) -> None:
        if not text:
            return
        if dim and self.tty:
            text = f"\x1b[2m{text}\x1b[0m"
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.write(text + "\n")

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    async def spin(self) -> None:
        """Show a spinner next to the running tools (terminals only)."""
        index = 0
        while True:
            await trio.sleep(0.1)
            if self.tty and self.running_tools:
                names = ", ".join(self.running_tools.values())
                self.out.write(f"\r{SPINNER[index % len(SPINNER)]} {names}\x1b[K")
                self.out.flush()
                index += 1


class AttachClient:
    """The connection, the terminal and the keyboard."""

    def __init__(self, args: argparse.Namespace, terminal: Terminal) -> None:
        self.args = args
        self.term = terminal
        self.base = daemon_url(args.url)
        self.token = daemon_token(args.token)
        self.headers = [(b"Authorization", f"Bearer {self.token}".encode())] if self.token else []
        self.ws: WebSocketConnection | None = None
        self.streaming = False
        self.last_seq = 0
        self.stream: str | None = None
        self.settled = trio.Event()
        self.settled.set()
        self.ids = 0
        self.input_done = False

    async def send(self, command: dict[str, Any]) -> None:
        if self.ws is None:
            return
        self.ids += 1
        await self.ws.send_message(json.dumps({"id": f"a{self.ids}", **command}))

    async def create_session(self) -> str:
        async with open_websocket_url(
            ws_url(self.base, "/v1/host"), extra_headers=self.headers
        ) as host:
            fields = {"model": self.args.model} if self.args.model else {}
            await host.send_message(json.dumps({"id": "create", "type": "create", **fields}))
            while True:
                frame = json.loads(await host.get_message())
                if frame.get("type") == "response" and frame.get("id") == "create":
                    if not frame["success"]:
                        raise SystemExit(f"Error: {frame['error']}")
                    session_id: str = frame["data"]["sessionId"]
                    return session_id

    async def run(self) -> int:
        session_id = self.args.session or await self.create_session()
        path = f"/v1/sessions/{session_id}"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.term.spin)
            nursery.start_soon(self._signals, nursery)
            nursery.start_soon(self._keyboard, nursery)
            failures = 0
            while failures < RECONNECTS:
                query = f"?since={self.last_seq}&stream={self.stream}" if self.stream else ""
                try:
                    async with open_websocket_url(
                        ws_url(self.base, path + query), extra_headers=self.headers
                    ) as ws:
                        self.ws = ws
                        failures = 0
                        await self._receive(ws)
                        return self._finish(nursery, 0)
                except ConnectionRejected as exc:
                    body = (exc.body or b"").decode("utf-8", "replace").strip()
                    self.term.note(f"Error: the daemon refused: {exc.status_code} {body}")
                    return self._finish(nursery, 1)
                except (ConnectionClosed, HandshakeError, OSError) as exc:
                    self.ws = None
                    if self.input_done and self.settled.is_set():
                        return self._finish(nursery, 0)
                    failures += 1
                    self.term.note(f"(connection lost: {exc!r}; reconnecting)")
                    await trio.sleep(0.5 * failures)
            self.term.note("Error: cannot reach the daemon")
            return self._finish(nursery, 1)
        return 0

    def _finish(self, nursery: trio.Nursery, code: int) -> int:
        nursery.cancel_scope.cancel()
        return code

    async def _receive(self, ws: WebSocketConnection) -> None:
        while True:
            try:
                frame = json.loads(await ws.get_message())
            except ConnectionClosed as exc:
                reason = exc.reason
                if reason is not None and reason.code in (1000, 1001, 1008):
                    self.term.note(f"(closed by the daemon: {reason.code} {reason.reason or ''})")
                    if reason.code != 1001 or self.input_done:
                        return
                raise
            self._show(frame)
            if (
                self.input_done
                and self.settled.is_set()
                and frame.get("type")
                in (
                    "agent_settled",
                    "response",
                    "attached",
                )
            ):
                return

    def _show(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        seq = frame.get("seq")
        if isinstance(seq, int) and kind not in ("attached", "response"):
            self.last_seq = max(self.last_seq, seq)
        term = self.term
        if kind == "attached":
            self.stream = frame.get("stream")
            self.last_seq = max(self.last_seq, int(frame.get("seq", 0)))
            term.note(f"attached to {frame['sessionId']} ({frame['status']})")
            self._set_streaming(bool(frame.get("isStreaming")))
        elif kind == "agent_start":
            self._set_streaming(True)
        elif kind == "agent_settled":
            self._set_streaming(False)
            term.line("")
        elif kind == "message_update":
            update = frame["assistantMessageEvent"]
            if update["type"] == "text_delta":
                term.write(update["delta"])
            elif update["type"] == "thinking_delta":
                term.write(update["delta"], dim=True)
            elif update["type"] == "thinking_end":
                term.write("\n")
        elif kind == "message_end" and frame["message"].get("role") == "assistant":
            message = frame["message"]
            if message.get("stopReason") in ("error", "aborted"):
                term.line(f"[{message.get('stopReason')}: {message.get('errorMessage', '')}]")
        elif kind == "tool_execution_start":
            term.running_tools[frame["toolCallId"]] = frame["toolName"]
            term.line(f"⚙ {frame['toolName']} {json.dumps(frame.get('args', {}))}")
        elif kind == "tool_execution_end":
            term.running_tools.pop(frame["toolCallId"], None)
            mark = "✗" if frame.get("isError") else "✓"
            if term.tty:
                term.write("\r\x1b[K")
            term.line(f"{mark} {frame['toolName']}")
        elif kind == "queue_update":
            queued = len(frame["steering"]) + len(frame["followUp"])
            if queued:
                term.note(f"(queued: {queued})")
        elif kind == "response" and not frame.get("success"):
            term.note(f"Error: {frame.get('command')}: {frame.get('error')}")
        elif kind in ("session_restarted", "session_failed", "session_closed", "resync"):
            term.note(f"({kind}: {frame.get('reason', '')})")

    def _set_streaming(self, streaming: bool) -> None:
        self.streaming = streaming
        if streaming and self.settled.is_set():
            self.settled = trio.Event()
        elif not streaming:
            self.settled.set()

    async def _keyboard(self, nursery: trio.Nursery) -> None:
        while True:
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                self.input_done = True
                await self.settled.wait()
                if self.ws is not None:
                    await self.ws.aclose()
                return
            text = line.rstrip("\n")
            if not text.strip():
                continue
            try:
                if self.streaming:
                    kind = "follow_up" if self.args.follow_up else "steer"
                    await self.send({"type": kind, "message": text})
                else:
                    self._set_streaming(True)  # until the run's events say otherwise
                    await self.send({"type": "prompt", "message": text})
            except ConnectionClosed:
                self.term.note("(not connected; line dropped)")

    async def _signals(self, nursery: trio.Nursery) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self.streaming and self.ws is not None:
                    self.term.note("(aborting)")
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
    client = AttachClient(args, Terminal(sys.stdout, sys.stderr))
    try:
        return trio.run(client.run) or 0
    except (ConnectionRejected, HandshakeError, OSError) as exc:
        sys.stderr.write(f"Error: cannot reach the daemon at {client.base}: {exc}\n")
        return 1
