"""``pitrio attach [SESSION]``: a terminal client of the daemon.

Connects to ``/v1/sessions/{id}`` (a new session when none is named) and works like a plain
chat: ``> `` asks for a prompt when the session is idle; the reply streams to stdout (thinking
dimmed, tool calls with their arguments and the tail of their output, retry and compaction
notices); an extension's question is asked in the terminal and the next lines answer it. While a
reply streams, Enter queues the line as a steering message (``--follow-up``: as a follow-up);
Ctrl-C cancels an open question, else aborts the run, else exits; end of input waits for the run
to settle and exits. A dropped connection is resumed from the last ``seq`` seen (a few tries,
then exit 1). The screen is :mod:`attach_screen` (shared with ``pitrio``'s terminal chat); where
the daemon is and the error texts are :mod:`attach_connect`; this module is the connection.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    open_websocket_url,
)

from pitrio.transports.attach_connect import (
    closed_reason,
    daemon_token,
    daemon_url,
    refused,
    unreachable,
    ws_url,
)
from pitrio.transports.attach_screen import AttachError, ChatScreen
from pitrio.transports.attach_terminal import Keyboard, Terminal, escape_ends_lines, stdio_terminal
from pitrio.transports.websocket_pings import answer_pings_only_while_open

# The daemon pings its clients: a ping during this client's close must not fail the close.
answer_pings_only_while_open()

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


class AttachClient(ChatScreen):
    """The screen on a daemon's session socket, resumed after a dropped connection."""

    def __init__(self, args: argparse.Namespace, term: Terminal, keys: Keyboard) -> None:
        super().__init__(term, keys, follow_up=args.follow_up)
        self.args = args
        self.base = daemon_url(args.url)
        self.token = daemon_token(args.token)
        value = self.token.value
        self.headers = [(b"Authorization", f"Bearer {value}".encode())] if value else []

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
                    value = await self.choose(str(frame.get("title", "")), frame.get("options"))
                    await host.send_message(json.dumps({**answer, "value": value}))
                    continue
                if frame.get("type") == "response" and frame.get("id") == "create":
                    if not frame["success"]:
                        raise AttachError(f"could not create a session: {frame['error']}")
                    session_id: str = frame["data"]["sessionId"]
                    return session_id

    async def run(self) -> int:
        """Attach until the end: the exit code (``AttachError`` for a failure to tell)."""
        try:
            session_id = self.args.session or await self.create_session()
        except ConnectionRejected as exc:
            raise AttachError(refused(exc.status_code, exc.body, self.token, "the daemon")) from exc
        except (HandshakeError, OSError, ConnectionClosed) as exc:
            raise AttachError(unreachable(self.base, exc)) from exc
        return await self.screen(lambda: self._connection(f"/v1/sessions/{session_id}"))

    async def _connection(self, path: str) -> int:
        """Receive until the end; reconnect with resume after a loss (a few times)."""
        failures, connected, reason = 0, False, ""
        while failures <= RECONNECTS:
            state = self.state
            query = f"?since={state.last_seq}&stream={state.stream}" if state.stream else ""
            try:
                async with self._open(path + query) as ws:
                    self.link, connected = ws, True
                    first = await ws.get_message()  # the `attached` frame: really back
                    failures = 0
                    return await self.receive(ws, first)
            except ConnectionRejected as exc:
                what = f"session {path.rsplit('/', 1)[-1]}"
                raise AttachError(refused(exc.status_code, exc.body, self.token, what)) from exc
            except (ConnectionClosed, HandshakeError, OSError) as exc:
                self.link = None
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


def attach_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio attach``; returns the exit code."""
    args = build_parser().parse_args(list(argv))
    term = stdio_terminal()
    with escape_ends_lines(sys.stdin.fileno()) as escape:
        client = AttachClient(args, term, Keyboard(sys.stdin.fileno(), escape=escape))
        try:
            return trio.run(client.run)
        except AttachError as exc:
            term.error(f"Error: {exc}")
            return 1
