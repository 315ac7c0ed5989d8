"""The chaos run's client: one websocket session client that reconnects and repeats commands.

A command is sent with an id of the client's own and sent again, same id, until it is answered
and (a prompt) its run is seen to end: on a lost connection, a refusal (the session is owned
elsewhere, the store is down, the session turned read-only) or a timeout the client waits a
little, reconnects, to the daemon the last one named as the owner or else the other one, and
repeats. What it was told is kept for :func:`bench.chaos.check`.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from typing import Any

import attrs
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

WAIT = 20.0
"""Seconds creating a session or reading its messages may take."""
TRANSIENT = (ConnectionClosed, ConnectionRejected, HandshakeError, OSError, trio.TooSlowError)


class Retry(Exception):
    """This attempt failed; the command is sent again."""


@attrs.define
class Targets:
    """The daemons' websocket URLs (fixed ports: a restarted daemon keeps its URL)."""

    urls: list[str]

    def index_of(self, url: str) -> int | None:
        """The daemon a ``session_owned_elsewhere`` URL names."""
        port = url.rstrip("/").rsplit(":", 1)[-1]
        for index, known in enumerate(self.urls):
            if known.endswith(f":{port}"):
                return index
        return None


@attrs.define(eq=False)
class ChaosClient:
    """One session's client (see the module docstring)."""

    index: int
    targets: Targets
    home: int
    rng: random.Random
    prompt: str
    repeat_share: float
    patience: float = 3.0
    """Seconds a command's attempt waits for its next frame before it tries again (a SIGSTOPped
    daemon says nothing; past its lease the other daemon takes the session over)."""
    session_id: str = ""
    acked: list[str] = attrs.Factory(list)
    outages: list[float] = attrs.Factory(list)
    errors: Counter[str] = attrs.Factory(Counter)
    final_view: list[str] = attrs.Factory(list)
    notes: dict[str, list[str]] = attrs.Factory(dict)
    """Per command id, what each attempt met (for the report of a lost or repeated one)."""
    current: str = "create"
    """The command being applied (``create``, an id, ``final``)."""
    done: bool = False
    sent: int = 0
    resends: int = 0
    repeats: int = 0
    unflagged: int = 0
    reconnects: int = 0

    async def _open(self, path: str) -> tuple[Any, str]:
        url = self.targets.urls[self.home] + path
        return open_websocket_url(url, connect_timeout=5, disconnect_timeout=1), url

    async def _backoff(self, failure: str) -> None:
        self.errors[failure] += 1
        await trio.sleep(self.rng.uniform(0.1, 0.4))

    async def create(self) -> None:
        """Make the session (an idempotent create: a repeat finds the first's session)."""
        command = {"id": "c", "type": "create", "idempotencyKey": f"chaos-{self.index}"}
        while True:
            try:
                with trio.fail_after(WAIT):
                    opener, _ = await self._open("/v1/host")
                    async with opener as ws:
                        await receive(ws)
                        await ws.send_message(json.dumps(command))
                        answer = await response(ws, "c")
                if answer["success"]:
                    self.session_id = answer["data"]["sessionId"]
                    return
                await self._backoff("create refused")
            except TRANSIENT as exc:
                await self._backoff(type(exc).__name__)

    async def run(self, count: int, faults_over: trio.Event) -> None:
        """Commands until ``count`` are done and the faults are over."""
        step = 0
        while step < count or not faults_over.is_set():
            key = f"s{self.index}-{step}"
            if step % 3 == 2:
                line = f"echo {key} > out-{key}.txt"  # a new file: a full disk refuses it
                command = {"id": key, "type": "bash", "command": line}
            else:
                command = {"id": key, "type": "prompt", "message": self.prompt}
            await self.apply(command, repeat=False)
            if self.rng.random() < self.repeat_share:
                self.repeats += 1
                await self.apply(command, repeat=True)
            step += 1

    async def apply(self, command: dict[str, Any], *, repeat: bool) -> None:
        """Send ``command`` until it is answered (and a prompt's run has ended)."""
        first_failure: float | None = None
        attempts = 0
        self.current = command["id"]
        while True:
            attempts += 1
            self.sent += 1
            if attempts > 1:
                self.resends += 1
            try:
                answer = await self._attempt(command)
            except (Retry, *TRANSIENT) as exc:
                self.notes.setdefault(command["id"], []).append(
                    f"{self.home}:{exc!r}"[:60] + f"@{time.time():.2f}"
                )
                first_failure = first_failure or time.monotonic()
                self.reconnects += 1
                if not isinstance(exc, Retry):  # dead or silent: try the other daemon
                    self.home = 1 - self.home
                if isinstance(exc, ConnectionRejected) and exc.status_code == 404:
                    # Never prompted, so never stored (pi's lazy creation), and its daemon
                    # restarted: the documented answer is the idempotent create again.
                    await self.create()
                await self._backoff(str(exc) if isinstance(exc, Retry) else type(exc).__name__)
                continue
            note = (
                f"{self.home}:ok{' duplicate' if answer.get('duplicate') else ''}@{time.time():.2f}"
            )
            self.notes.setdefault(command["id"], []).append(note)
            if first_failure is not None:
                self.outages.append(time.monotonic() - first_failure)
            if repeat:
                if not answer.get("duplicate"):
                    self.unflagged += 1
            elif command["id"] not in self.acked:
                self.acked.append(command["id"])
            return

    async def _attempt(self, command: dict[str, Any]) -> dict[str, Any]:
        # Each frame received moves the deadline: silence, not a long run, ends an attempt.
        with trio.CancelScope() as scope:
            scope.deadline = trio.current_time() + self.patience
            opener, _ = await self._open(f"/v1/sessions/{self.session_id}")
            async with opener as ws:
                await self._attach(ws)
                await ws.send_message(json.dumps(command))
                frames: list[dict[str, Any]] = []
                answer = await response(ws, command["id"], frames, scope, self.patience)
                if not answer["success"]:
                    error = str(answer.get("error", ""))
                    raise Retry("in progress" if answer.get("inProgress") else error[:60])
                if command["type"] != "prompt":
                    return answer
                if answer.get("duplicate") and not await streaming(ws):
                    return answer
                if not any(f.get("type") == "agent_settled" for f in frames):
                    settle = lambda f: f.get("type") == "agent_settled"  # noqa: E731
                    await until(ws, settle, None, scope, self.patience)
                return answer
        raise trio.TooSlowError

    async def _attach(self, ws: WebSocketConnection) -> None:
        hello = await receive(ws)
        if hello.get("type") == "attached":
            return
        if hello.get("type") == "session_owned_elsewhere":
            named = self.targets.index_of(str(hello.get("url", "")))
            self.home = named if named is not None and named != self.home else 1 - self.home
            raise Retry("owned elsewhere")
        self.home = 1 - self.home
        raise Retry(f"hello {hello.get('type')}")

    async def final(self) -> None:
        """Read the session's messages as this client sees them now."""
        self.current = "final"
        while True:
            try:
                with trio.fail_after(WAIT):
                    opener, _ = await self._open(f"/v1/sessions/{self.session_id}")
                    async with opener as ws:
                        await self._attach(ws)
                        await ws.send_message(json.dumps({"id": "m", "type": "get_messages"}))
                        answer = await response(ws, "m")
                if answer["success"]:
                    self.final_view = [text_of(m) for m in answer["data"]["messages"]]
                    self.done = True
                    return
                await self._backoff("final refused")
            except (Retry, *TRANSIENT) as exc:
                await self._backoff(type(exc).__name__)


def text_of(message: dict[str, Any]) -> str:
    """``role:text`` of one message (text blocks joined; a bash record by its command)."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    if message.get("role") == "bashExecution":
        content = message.get("command")
    return f"{message.get('role')}:{content or ''}"


async def receive(ws: WebSocketConnection) -> dict[str, Any]:
    """The next frame, as JSON."""
    value: dict[str, Any] = json.loads(await ws.get_message())
    return value


async def until(
    ws: WebSocketConnection,
    done: Any,
    frames: list[Any] | None = None,
    scope: trio.CancelScope | None = None,
    patience: float = 0.0,
) -> Any:
    """Frames up to the first ``done`` accepts (kept in ``frames``); that frame. Each frame
    moves ``scope``'s deadline ``patience`` seconds on."""
    while True:
        frame = await receive(ws)
        if scope is not None:
            scope.deadline = trio.current_time() + patience
        if frames is not None:
            frames.append(frame)
        if done(frame):
            return frame


async def response(
    ws: WebSocketConnection,
    key: str,
    frames: list[Any] | None = None,
    scope: trio.CancelScope | None = None,
    patience: float = 0.0,
) -> dict[str, Any]:
    """The response to request ``key``."""
    found: dict[str, Any] = await until(
        ws, lambda f: f.get("type") == "response" and f.get("id") == key, frames, scope, patience
    )
    return found


async def streaming(ws: WebSocketConnection) -> bool:
    """Whether the session runs a prompt now (``get_state``)."""
    await ws.send_message(json.dumps({"id": "state", "type": "get_state"}))
    answer = await response(ws, "state")
    return bool(answer.get("data", {}).get("isStreaming"))
