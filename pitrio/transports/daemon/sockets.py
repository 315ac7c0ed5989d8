"""The two websocket endpoints of the daemon.

``/v1/sessions/{id}`` (:class:`SessionSocket`) speaks the RPC protocol of ``pi --mode rpc``,
one JSON object per text frame: the same commands (dispatched by
:func:`pitrio.transports.rpc.commands.execute`, this class being the ``RpcBackend``), the same
responses and events, every event with the session's ``seq``. Additions:

* an ``attached`` frame first (session id, status, ``seq``, ``stream``);
* ``resume {since, stream?}`` (or ``?since=&stream=`` on the URL): the frames after
  ``since`` from the replay buffer, or a response with ``resync: true`` when they are gone;
* notices: ``session_restarted``, ``session_failed``, ``session_closed``, ``resync``;
* ``extension_ui_answered {id}`` to every client once one answered a dialog (so the others
  close it); a client attaching while a dialog waits gets its request after ``attached``
  (``timeout`` cut to the time left);
* ``new_session``, ``fork`` and ``clone`` create *another* hosted session and answer its
  ``sessionId`` (this connection stays on its session); ``switch_session`` is refused.

``/v1/host`` (:class:`HostSocket`) lists, searches, creates, opens, renames, closes and
deletes sessions, lists the models a new session may use, and streams host events.

Each connection has a reader (rate limit, parse, one task per command), a sender (the only
task writing to the socket, taking frames in order from the client's feed) and a watchdog: a
send that makes no progress for ``stall_seconds`` cuts the client off. A client cut off for
slowness is closed with code 1008 and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from pitrio.errors import PitrioError
from pitrio.logs import event as log_event
from pitrio.messages.events import MessageUpdate
from pitrio.messages.model import Model
from pitrio.sdk.host import AttachedClient, HostedSession, Outgoing, SessionOwnedElsewhereError
from pitrio.sdk.session import Sequenced, SessionHandle, UiResponse
from pitrio.transports.daemon.context import DaemonContext
from pitrio.transports.daemon.follower import follow_elsewhere
from pitrio.transports.daemon.frames import event_frame, problem_of, safe_json_frame
from pitrio.transports.daemon.security import RateLimiter
from pitrio.transports.daemon.websocket import close_reason
from pitrio.transports.rpc.commands import (
    EVENTFUL_COMMANDS,
    HANDLERS,
    ScopedModel,
    execute,
    unknown_command,
)
from pitrio.transports.rpc.events import UpdateFormat
from pitrio.transports.rpc.protocol import MISSING, Request, failure, parse_record, success

log = logging.getLogger("pitrio.daemon")

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_PING_TIMEOUT = 1011
REFUSED_FRAME_CODES = frozenset({1002, 1007, 1009})
SHUTDOWN_FLUSH_SECONDS = 1.5
"""How long a connection may keep sending queued frames once the daemon shuts down."""

BRANCHING_COMMANDS = frozenset({"new_session", "fork", "clone", "switch_session"})


def parse_error(message: str) -> dict[str, Any]:
    """A parse-error response (pi's shape: no id, command ``parse``)."""
    return {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": f"Failed to parse command: {message}",
    }


def _nothing() -> None:
    """A no-op ``bash_accepted``."""


class _Socket:
    """What both endpoints share: the websocket, a cancel scope, rate limit, close."""

    def __init__(self, server: DaemonContext, ws: WebSocketConnection) -> None:
        self.server = server
        self.ws = ws
        config = server.config
        self.limiter = RateLimiter(config.message_rate, config.message_burst)
        self.scope = trio.CancelScope()
        self.closed = False
        self._close_done = trio.Event()

    async def close(self, code: int, reason: str) -> None:
        """Close the websocket (waiting at most ``close_timeout`` for a stalled peer); a
        second call waits for the first one to finish."""
        if self.closed:
            await self._close_done.wait()
            return
        self.closed = True
        self._note_refused()
        try:
            with trio.move_on_after(self.server.config.close_timeout):
                await self.ws.aclose(code, close_reason(reason))
        finally:
            self._close_done.set()
            self.scope.cancel()

    async def keepalive(self) -> None:
        """Ping the peer every ``ping_interval``; close the connection when a pong does not
        come within ``ping_timeout`` (the peer vanished, or stopped reading altogether)."""
        config = self.server.config
        if config.ping_interval is None:
            return
        while True:
            await trio.sleep(config.ping_interval)
            with trio.move_on_after(config.ping_timeout) as waiting:
                try:
                    await self.ws.ping()
                except ConnectionClosed:
                    return
            if waiting.cancelled_caught:
                self.server.counters["ping_timeouts"] += 1
                await self.close(CLOSE_PING_TIMEOUT, f"no pong within {config.ping_timeout:g} s")
                return

    def allow(self) -> bool:
        """Whether the rate limit lets one more message through."""
        if self.limiter.allow(trio.current_time()):
            return True
        self.server.counters["rate_limited"] += 1
        return False

    async def next_request(self, push: Callable[[dict[str, Any]], None]) -> Request | None:
        """The next well-formed command frame, or ``None`` once the socket closed.

        Frames over the rate limit, binary frames and records that do not parse are answered
        through ``push`` with an error and skipped; so is a record whose reading fails in any
        other way (the connection outlives every frame).
        """
        while True:
            try:
                message = await self.ws.get_message()
            except ConnectionClosed:
                return None  # counted by close() if a bad frame ended it
            if not self.allow():
                push(self.rate_error())
                continue
            if isinstance(message, bytes):
                push(parse_error("binary frames are not supported; send JSON text"))
                continue
            try:
                parsed = parse_record(message)
            except Exception as exc:  # e.g. RecursionError writing the error about it
                log.info("a frame that failed to parse: %r", exc)
                parsed = parse_error(problem_of(exc))
            if isinstance(parsed, Request):
                return parsed
            push(parsed)

    def _note_refused(self) -> None:
        """Count and log a connection the websocket layer ended over a bad frame: invalid UTF-8
        (1007), a protocol violation (1002), a message over the size limit (1009); the client
        got a close frame with the code and reason (:mod:`.websocket`).

        Read from the connection's close reason when the socket closes, not where the reader
        meets the close: the sender may meet it first and cancel the reader, which then never
        sees it."""
        reason = self.ws.closed
        if reason is not None and reason.code in REFUSED_FRAME_CODES:
            self.server.counters["refused_frames"] += 1
            log_event(log, "frame_refused", code=reason.code, reason=reason.reason)

    def rate_error(self) -> dict[str, Any]:
        config = self.server.config
        return {
            "type": "response",
            "command": "rate_limit",
            "success": False,
            "error": f"Rate limit exceeded: at most {config.message_rate:g} messages per second "
            f"(bursts of {config.message_burst}); message dropped",
        }


class SessionSocket(_Socket):
    """One client of ``/v1/sessions/{id}``; the :class:`RpcBackend` of its commands."""

    def __init__(
        self,
        server: DaemonContext,
        ws: WebSocketConnection,
        hosted: HostedSession,
        *,
        updates: UpdateFormat = "delta",
    ) -> None:
        super().__init__(server, ws)
        self.hosted = hosted
        self.updates: UpdateFormat = updates
        self.client: AttachedClient | None = None
        self._sending_since: float | None = None
        self._inflight = 0
        self._drained = trio.Event()

    # -- RpcBackend ----------------------------------------------------------------------

    def bash_accepted(self, request: Request) -> Callable[[], None]:
        """Nothing to release: this socket does not order ``abort_bash`` after ``bash``."""
        return _nothing

    async def earlier_bash_accepted(self, request: Request) -> None:
        """Returns at once (the stdio server's ordering is not wired into sockets yet)."""
        await trio.lowlevel.checkpoint()

    async def session(self) -> SessionHandle:
        """The hosted session (reopened when it was evicted)."""
        self.hosted.touch()
        return await self.hosted.session()

    def events_before_response(self, request: Request, session: SessionHandle, seq: int) -> None:
        """Unused here: the hosted session's own barrier orders responses (``_handle``)."""

    async def _answer_dialog(self, response: UiResponse) -> None:
        try:
            await (await self.session()).respond_ui(response)
        except PitrioError as exc:  # never answered (pi's rule), so only logged
            log.info("session %s: a dialog answer was lost: %s", self.hosted.id, exc)
            return
        # Every client of the session showed the dialog: the others close theirs, and a
        # client attaching from now on is not shown it.
        self.hosted.dialogs.answered(response.id)
        self.hosted.notify({"type": "extension_ui_answered", "id": response.id})

    async def new_session(self, parent_session: str | None) -> None:
        """Answered by :meth:`_branching` (never through ``execute``)."""
        raise PitrioError("new_session creates a separate session over the daemon")

    async def switch_session(self, path: str) -> None:
        """Refused: a connection belongs to one session."""
        raise PitrioError(_NO_SWITCH)

    async def fork(self, entry_id: str) -> str | None:
        """Answered by :meth:`_branching`."""
        raise PitrioError("fork creates a separate session over the daemon")

    async def clone(self) -> None:
        """Answered by :meth:`_branching`."""
        raise PitrioError("clone creates a separate session over the daemon")

    async def available_models(self) -> tuple[Model, ...]:
        """Every usable model (``faux/echo`` included: it is the daemon's offline default)."""
        return await self.server.router.available_models()

    def scoped_models(self) -> tuple[ScopedModel, ...]:
        """No ``--models`` scope over the daemon: cycling walks every available model."""
        return ()

    async def command_list(self) -> list[dict[str, Any]]:
        """Prompt templates and skills of the session."""
        return await (await self.session()).commands()

    def set_update_format(self, updates: UpdateFormat) -> None:
        """``set_event_format``: this connection's ``message_update`` form."""
        self.updates = updates

    # -- the connection ------------------------------------------------------------------

    async def run(self, *, since: int | None = None, stream: str | None = None) -> None:
        """Serve until either side closes (or the daemon shuts down)."""
        hosted = self.hosted
        try:
            await hosted.session()
        except SessionOwnedElsewhereError as exc:
            # Another daemon runs it (shared store): say which, then follow its entries.
            await follow_elsewhere(self, hosted, exc)
            return
        except PitrioError as exc:
            log.info("session %s attached while unavailable: %s", hosted.id, exc)
        client = hosted.attach(self.server.config.client_capacity, since=since)
        self.client = client
        self.server.counters["session_connections"] += 1
        try:
            if since is not None:
                self._resume(client, since, stream, None)
            with self.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._send_loop, client)
                    nursery.start_soon(self._watchdog, client)
                    nursery.start_soon(self._shutdown_watch, client)
                    nursery.start_soon(self.keepalive)
                    await self._read_loop(client, nursery)
                    self.scope.cancel()
        finally:
            client.detach()
            self.server.counters["session_connections"] -= 1
            with trio.CancelScope(shield=True):
                await self.close(CLOSE_NORMAL, "")

    async def _read_loop(self, client: AttachedClient, nursery: trio.Nursery) -> None:
        while (parsed := await self.next_request(client.push)) is not None:
            self.hosted.touch()
            try:
                self._dispatch(client, nursery, parsed)
            except Exception as exc:  # one bad frame must not end the connection
                log.info("session %s: a frame failed: %r", self.hosted.id, exc)
                client.push(failure(parsed, problem_of(exc)))

    def _dispatch(self, client: AttachedClient, nursery: trio.Nursery, parsed: Request) -> None:
        """Act on one command frame: answer it now or start the task that will."""
        if parsed.type == "resume":
            self._resume(client, parsed.get("since"), parsed.get("stream"), parsed)
        elif parsed.type == "extension_ui_response":
            # To the dialog with that id (any client of the session may answer; unknown
            # ids are ignored, as in pi); never answered itself.
            response = UiResponse.from_json(parsed.fields)
            nursery.start_soon(self._answer_dialog, response)
        elif parsed.type not in HANDLERS and parsed.type not in BRANCHING_COMMANDS:
            client.push(unknown_command(parsed))
        elif self._inflight >= self.server.config.max_inflight:
            limit = self.server.config.max_inflight
            client.push(failure(parsed, f"Too many commands in flight (limit {limit})"))
        else:
            self._inflight += 1
            if parsed.type == "prompt":
                # Counted now: the run's agent_start must not overtake the response.
                client.feed.open_gate(self.hosted.seq)
                nursery.start_soon(self._handle, client, parsed, self.hosted.seq)
            else:
                nursery.start_soon(self._handle, client, parsed, None)

    def _resume(
        self, client: AttachedClient, since: Any, stream: Any, request: Request | None
    ) -> None:
        hosted = self.hosted
        if not isinstance(since, int) or isinstance(since, bool) or since < 0:
            if request is not None:
                client.push(failure(request, "resume: since must be a non-negative integer"))
            return
        replayed = hosted.resume(client, since, stream if isinstance(stream, str) else None)
        data: dict[str, Any] = {"seq": hosted.seq, "stream": hosted.epoch}
        if replayed is None:
            self.server.counters["resyncs"] += 1
            data = {"resync": True, **data}
            if request is None:
                client.push(
                    {
                        "type": "resync",
                        "sessionId": hosted.id,
                        "reason": f"events after {since} are no longer held",
                        **data,
                    }
                )
        else:
            self.server.counters["resumes"] += 1
            data = {"replayed": replayed, **data}
        if request is not None:
            client.push(success(request, data), after_seq=hosted.seq)

    async def _handle(self, client: AttachedClient, request: Request, gate: int | None) -> None:
        try:
            try:
                if request.type in BRANCHING_COMMANDS:
                    response = await self._branching(request)
                else:
                    response = await execute(self, request)
            except Exception as exc:  # a bug answering one command: answered, not fatal
                log.exception("session %s: %s failed", self.hosted.id, request.type)
                response = failure(request, problem_of(exc))
            after = self.hosted.seq
            started = self.hosted.started
            if request.type in EVENTFUL_COMMANDS and started is not None:
                after = await self.hosted.barrier(started.session)
            client.feed.push(Outgoing(payload=response, after_seq=after, before_start_after=gate))
            client.wake()
        finally:
            self._inflight -= 1
            if gate is not None:
                client.feed.close_gate(gate)
                client.wake()

    async def _branching(self, request: Request) -> dict[str, Any]:
        """``new_session``, ``fork``, ``clone``: a new hosted session; ``switch_session``: no."""
        host = self.server.host
        try:
            if request.type == "switch_session":
                raise PitrioError(_NO_SWITCH)
            if request.type == "new_session":
                hosted = await host.create(cwd=self.hosted.cwd)
                return success(request, {"cancelled": False, "sessionId": hosted.id})
            if request.type == "clone":
                hosted = await host.clone(self.hosted)
                return success(request, {"cancelled": False, "sessionId": hosted.id})
            entry_id = request.get("entryId")
            if not isinstance(entry_id, str):
                raise PitrioError("fork: entryId must be a string")
            hosted, text = await host.fork(self.hosted, entry_id)
            return success(
                request, {"text": text or "", "cancelled": False, "sessionId": hosted.id}
            )
        except PitrioError as exc:
            return failure(request, str(exc))

    # -- sending ---------------------------------------------------------------------------

    def _encode(self, item: Sequenced | Outgoing | bytes) -> str:
        if isinstance(item, bytes):
            return item.decode("utf-8")
        if isinstance(item, Outgoing):
            return safe_json_frame(item.payload).decode("utf-8")
        if not isinstance(item.event, MessageUpdate):
            # Every other event has one form: the replay buffer's frame is it.
            cached = self.hosted.replay.get(item.seq)
            if cached is not None:
                return cached.decode("utf-8")
        return event_frame(item.seq, item.event, self.updates).decode("utf-8")

    async def _send_loop(self, client: AttachedClient) -> None:
        while True:
            item = client.feed.take()
            if item is None:
                reason = client.feed.closed_reason
                if reason is not None:
                    self.server.counters["slow_closes"] += 1
                    log.info("session %s: closing a slow client: %s", self.hosted.id, reason)
                    await self.close(CLOSE_POLICY, reason)
                    return
                if self.server.closing.is_set():
                    self._drained.set()
                await client.wait()
                continue
            try:
                frame = self._encode(item)
            except Exception as exc:  # an event the encoder cannot write: skipped, not fatal
                self.server.counters["encode_errors"] += 1
                log.warning("session %s: an event could not be encoded: %r", self.hosted.id, exc)
                continue
            self._sending_since = trio.current_time()
            try:
                await self.ws.send_message(frame)
            except ConnectionClosed:
                self.scope.cancel()
                return
            finally:
                self._sending_since = None
            if isinstance(item, Outgoing) and item.payload.get("type") == "session_closed":
                await self.close(CLOSE_NORMAL, "session closed")
                return

    async def _watchdog(self, client: AttachedClient) -> None:
        stall = self.server.config.stall_seconds
        while True:
            await trio.sleep(stall / 4)
            started = self._sending_since
            if started is None or trio.current_time() - started < stall:
                continue
            if client.feed.closed_reason is None:
                client.feed.close(f"client too slow: a send made no progress for {stall:g} s")
                self.hosted.dropped_clients += 1
            # The sender is stuck inside a send; the close frame follows it once the peer
            # reads again (or the connection is dropped after close_timeout).
            self.server.counters["slow_closes"] += 1
            await self.close(CLOSE_POLICY, client.feed.closed_reason or "client too slow")
            return

    async def _shutdown_watch(self, client: AttachedClient) -> None:
        await self.server.closing.wait()
        client.wake()  # the sender reports when it has nothing left to send
        with trio.move_on_after(SHUTDOWN_FLUSH_SECONDS):
            await self._drained.wait()
        await self.close(CLOSE_GOING_AWAY, "server shutting down")


_NO_SWITCH = (
    "switch_session is not available over the daemon: open the session with /v1/host and "
    "connect to /v1/sessions/{id}"
)


class HostSocket(_Socket):
    """One client of ``/v1/host``."""

    def __init__(self, server: DaemonContext, ws: WebSocketConnection) -> None:
        super().__init__(server, ws)
        self._out, self._out_receive = trio.open_memory_channel[bytes](server.config.host_queue)

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
            case "rename":
                name = await host.rename(_session_id(request), _required_str(request, "name"))
                return {"sessionId": request.get("sessionId"), "name": name}
            case "create":
                hosted = await host.create(
                    cwd=_optional_str(request, "cwd"),
                    model=_optional_str(request, "model"),
                    thinking_level=_optional_str(request, "thinkingLevel"),
                    name=_optional_str(request, "name"),
                )
                return {"sessionId": hosted.id, **_describe(hosted)}
            case "open":
                hosted = await host.open(_session_id(request))
                return {"sessionId": hosted.id, **_describe(hosted)}
            case "get":
                hosted = await host.get(_session_id(request))
                return {"sessionId": hosted.id, **_describe(hosted)}
            case "close":
                await host.close(_session_id(request))
                return MISSING
            case "delete":
                await host.delete(_session_id(request))
                return MISSING
            case "stats":
                return _stats_data(await host.host_stats())
        return None


def _describe(hosted: HostedSession) -> dict[str, Any]:
    return {
        "path": str(hosted.path) if hosted.path is not None else None,
        "cwd": hosted.cwd,
        **hosted.row(),
    }


def _stats_data(stats: Any) -> dict[str, Any]:
    import attrs

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


def _session_id(request: Request) -> str:
    value = request.get("sessionId")
    if not isinstance(value, str):
        raise PitrioError(f"{request.type}: sessionId must be a string")
    return value
