"""The daemon's ``/v1/host`` endpoint (:class:`HostSocket`): list, search, create, open,
rename, close and delete sessions, list the models a new session may use, and stream host
events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from pitrio.errors import PitrioError, SessionNotFoundError
from pitrio.sdk.host import HostedSession, HostHandle, idempotent_session_id
from pitrio.transports.daemon.context import DaemonContext
from pitrio.transports.daemon.frames import problem_of, safe_json_frame
from pitrio.transports.daemon.socket_base import (
    CLOSE_GOING_AWAY,
    CLOSE_NORMAL,
    CLOSE_POLICY,
    ClientSocket,
    log,
)
from pitrio.transports.rpc.commands import unknown_command
from pitrio.transports.rpc.protocol import MISSING, Request, failure, success

TrustAsker = Callable[[str, Sequence[str]], Awaitable[str | None]]
"""Asks a client the project-trust question: its answer (an option's label) or ``None``."""
TRUST_ANSWER_SECONDS = 300.0
"""How long a session's creation waits for the client's project-trust answer."""


class HostSocket(ClientSocket):
    """One client of ``/v1/host``."""

    def __init__(self, server: DaemonContext, ws: WebSocketConnection) -> None:
        super().__init__(server, ws)
        self._out, self._out_receive = trio.open_memory_channel[bytes](server.config.host_queue)
        self._trust_questions: dict[str, tuple[trio.Event, list[str | None]]] = {}
        self._trust_ids = 0

    async def _ask_trust(self, title: str, options: Sequence[str]) -> str | None:
        """The project-trust dialog of a session this client creates: a
        ``project_trust_request`` frame; the client answers with ``project_trust_response``
        (``{"id", "value": <label> | null}``). No answer within :data:`TRUST_ANSWER_SECONDS`
        (or the connection gone) is no answer: the project is not trusted."""
        self._trust_ids += 1
        question = f"trust-{self._trust_ids}"
        answered = trio.Event()
        slot: list[str | None] = [None]
        self._trust_questions[question] = (answered, slot)
        self._push(
            {
                "type": "project_trust_request",
                "id": question,
                "title": title,
                "options": list(options),
                "timeout": int(TRUST_ANSWER_SECONDS * 1000),
            }
        )
        try:
            with trio.move_on_after(TRUST_ANSWER_SECONDS):
                await answered.wait()
        finally:
            self._trust_questions.pop(question, None)
        return slot[0]

    def _trust_answer(self, request: Request) -> Any:
        question = request.get("id")
        value = request.get("value")
        waiting = self._trust_questions.get(question) if isinstance(question, str) else None
        if waiting is None:
            raise PitrioError(f"project_trust_response: no open question {question!r}")
        if value is not None and not isinstance(value, str):
            raise PitrioError("project_trust_response: value must be a string or null")
        answered, slot = waiting
        slot[0] = value
        answered.set()
        return MISSING

    def _push(self, value: Any) -> None:
        try:
            self._out.send_nowait(safe_json_frame(value))
        except trio.WouldBlock:
            self.server.counters["slow_closes"] += 1
            self.server.spawn(self.close(CLOSE_POLICY, "client too slow: host events queued"))

    async def run(self) -> None:
        """Serve until either side closes."""
        events = await self.server.host.subscribe()
        self.server.counters["host_connections"] += 1
        self._push({"type": "host_attached", "version": 1})
        self.attached()
        try:
            with self.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._send_loop)
                    nursery.start_soon(self._forward, events)
                    nursery.start_soon(self._shutdown_watch)
                    nursery.start_soon(self.keepalive)
                    await self._read_loop(nursery)
                    self.scope.cancel()
        finally:
            self.server.counters["host_connections"] -= 1
            await events.aclose()
            with trio.CancelScope(shield=True):
                await self.close(CLOSE_NORMAL, "")

    def attached(self) -> None:
        """Called right after ``host_attached`` is queued (a worker's client starts taking
        the other workers' events here)."""

    async def _forward(self, events: trio.MemoryReceiveChannel[dict[str, Any]]) -> None:
        async for event in events:
            self._push(event)
        # The host dropped this subscriber: it fell behind.
        await self.close(CLOSE_POLICY, "client too slow: host events dropped")

    async def _send_loop(self) -> None:
        async for frame in self._out_receive:
            try:
                await self.ws.send_message(frame.decode("utf-8"))
            except ConnectionClosed:
                self.scope.cancel()
                return

    async def _shutdown_watch(self) -> None:
        await self.server.closing.wait()
        await self.close(CLOSE_GOING_AWAY, "server shutting down")

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        while (parsed := await self.next_request(self._push)) is not None:
            nursery.start_soon(self._handle, parsed)

    async def _handle(self, request: Request) -> None:
        try:
            data = await self._command(request)
        except PitrioError as exc:
            self._push(failure(request, str(exc)))
            return
        except Exception as exc:  # a bug answering one command: answered, not fatal
            log.exception("host command %s failed", request.type)
            self._push(failure(request, problem_of(exc)))
            return
        if data is None:
            self._push(unknown_command(request))
        else:
            self._push(success(request, data))

    async def _command(self, request: Request) -> Any:
        host = self.server.host
        match request.type:
            case "list":
                return {"sessions": await host.list()}
            case "search":
                return {"sessions": await host.search(_required_str(request, "query"))}
            case "models":
                return await host.models(_optional_str(request, "cwd"))
            case "create":
                return await self.create(request)
            case "open" | "get" | "close" | "delete" | "rename":
                return await session_command(host, request)
            case "stats":
                return _stats_data(await host.host_stats())
            case "project_trust_response":
                return self._trust_answer(request)
        return None

    async def create(self, request: Request) -> Any:
        """``create``: a new session in this daemon (or, with an ``idempotencyKey``, the one
        an earlier create with that key made)."""
        # A client that can show the project-trust dialog says so; else "ask" means
        # untrusted, as in pi 1.6.0's modes without a terminal.
        asker = self._ask_trust if request.get("trustDialog") is True else None
        return await create_session(self.server.host, request, asker)


async def create_session(
    host: HostHandle, request: Request, trust_asker: TrustAsker | None
) -> dict[str, Any]:
    """Apply a ``create`` command to ``host``: the response's data."""
    session_id = None
    if request.get("idempotencyKey") is not None:
        # The key names the session: a repeat (after a lost answer, a restart, on another
        # daemon or worker) finds the one the first made.
        session_id = idempotent_session_id(request.get("idempotencyKey"))
        try:
            hosted = await host.open(session_id)
        except SessionNotFoundError:
            pass
        else:
            return {"sessionId": hosted.id, **_describe(hosted), "duplicate": True}
    hosted = await host.create(
        cwd=_optional_str(request, "cwd"),
        model=_optional_str(request, "model"),
        thinking_level=_optional_str(request, "thinkingLevel"),
        name=_optional_str(request, "name"),
        trust_asker=trust_asker,
        session_id=session_id,
    )
    return {"sessionId": hosted.id, **_describe(hosted)}


NAMED_COMMANDS = frozenset({"open", "get", "close", "delete", "rename"})
"""The ``/v1/host`` commands that act on the one session their ``sessionId`` names (with
``--workers``, the worker owning it answers them)."""


async def session_command(host: HostHandle, request: Request) -> Any:
    """Apply one of :data:`NAMED_COMMANDS` to ``host``: the response's data."""
    match request.type:
        case "open":
            hosted = await host.open(session_id_of(request))
            return {"sessionId": hosted.id, **_describe(hosted)}
        case "get":
            hosted = await host.get(session_id_of(request))
            return {"sessionId": hosted.id, **_describe(hosted)}
        case "close":
            await host.close(session_id_of(request))
            return MISSING
        case "delete":
            await host.delete(session_id_of(request))
            return MISSING
        case "rename":
            name = await host.rename(session_id_of(request), _required_str(request, "name"))
            return {"sessionId": request.get("sessionId"), "name": name}
    raise PitrioError(f"{request.type}: not a command on one session")


def _describe(hosted: HostedSession) -> dict[str, Any]:
    return {
        "path": str(hosted.path) if hosted.path is not None else None,
        "cwd": hosted.cwd,
        **hosted.row(),
    }


def _stats_data(stats: Any) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(orjson.dumps(attrs.asdict(stats)))
    return value


def _optional_str(request: Request, name: str) -> str | None:
    value = request.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise PitrioError(f"{request.type}: {name} must be a string")
    return value


def _required_str(request: Request, name: str) -> str:
    value = request.get(name)
    if not isinstance(value, str):
        raise PitrioError(f"{request.type}: {name} must be a string")
    return value


def session_id_of(request: Request) -> str:
    """The ``sessionId`` of a command naming one session (a string, else an error)."""
    value = request.get("sessionId")
    if not isinstance(value, str):
        raise PitrioError(f"{request.type}: sessionId must be a string")
    return value
