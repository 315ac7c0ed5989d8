"""The daemon's session endpoint.

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

``/v1/host`` is :mod:`.host_socket`; what both share is :mod:`.socket_base`.

Each connection has a reader (rate limit, parse, one task per command), a sender (the only
task writing to the socket, taking frames in order from the client's feed) and a watchdog: a
send that makes no progress for ``stall_seconds`` cuts the client off. A client cut off for
slowness is closed with code 1008 and the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from pitrio.errors import PitrioError, SessionNotFoundError
from pitrio.messages.events import MessageUpdate
from pitrio.messages.model import Model
from pitrio.sdk.host import (
    AttachedClient,
    FramedEvent,
    HostedSession,
    Outgoing,
    SessionOwnedElsewhereError,
    idempotent_session_id,
)
from pitrio.sdk.session import Sequenced, SessionHandle, UiResponse, current_stamp
from pitrio.transports.daemon.context import DaemonContext
from pitrio.transports.daemon.follower import follow_elsewhere
from pitrio.transports.daemon.frames import (
    delta_frame,
    event_frame,
    problem_of,
    safe_json_frame,
)
from pitrio.transports.daemon.socket_base import (
    CLOSE_GOING_AWAY,
    CLOSE_NORMAL,
    CLOSE_POLICY,
    SHUTDOWN_FLUSH_SECONDS,
    ClientSocket,
    log,
)
from pitrio.transports.daemon.websocket import DaemonWebSocket
from pitrio.transports.rpc.commands import (
    EVENTFUL_COMMANDS,
    HANDLERS,
    CommandError,
    ScopedModel,
    execute,
    unknown_command,
)
from pitrio.transports.rpc.events import EntryFormat, UpdateFormat
from pitrio.transports.rpc.once import apply_once, hosted_ledger, ledger_key
from pitrio.transports.rpc.protocol import Request, failure, success

BRANCHING_COMMANDS = frozenset({"new_session", "fork", "clone", "switch_session"})


def _nothing() -> None:
    """A no-op ``bash_accepted``."""


class SessionSocket(ClientSocket):
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
        # The relay's frames are in the delta form when the host encodes with delta_frame
        # (the daemon's): a delta client's update is then sent as the relay encoded it.
        self._relay_deltas = hosted.frame_encoder is delta_frame

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

    def set_entry_format(self, entries: EntryFormat) -> None:
        """Only ``all``: every frame of a hosted session has its sequence number, and a
        client resuming with ``since`` counts on seeing each one."""
        if entries != "all":
            raise CommandError(
                'The daemon announces every entry (entries "all"); filter entry_appended '
                "frames on the client"
            )

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
                response = await self._apply(request)
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

    async def _apply(self, request: Request) -> dict[str, Any]:
        """Apply ``request`` once per id for the session, whichever connection or daemon
        sent it before (its id is written with the entries it produces)."""
        if ledger_key(request) is None:
            return await self._apply_now(request)
        try:
            ledger = await hosted_ledger(self.hosted)
        except PitrioError:
            return await self._apply_now(request)  # no session to ask: the command says why
        return await apply_once(ledger, request, lambda: self._apply_now(request), durable=True)

    async def _apply_now(self, request: Request) -> dict[str, Any]:
        if request.type in BRANCHING_COMMANDS:
            return await self._branching(request)
        return await execute(self, request)

    async def _branching(self, request: Request) -> dict[str, Any]:
        """``new_session``, ``fork``, ``clone``: a new hosted session; ``switch_session``: no.
        Applied for a client id, the new session's id is made from it (a repeat after a
        restart, or on another daemon, finds the session the first made)."""
        host = self.server.host
        stamp = current_stamp()
        made = None
        if stamp is not None:
            made = idempotent_session_id(f"{self.hosted.id}\n{stamp.id}\n{stamp.fingerprint}")
        try:
            if request.type == "switch_session":
                raise PitrioError(_NO_SWITCH)
            if request.type == "new_session":
                hosted = await self._new_session(made)
                await self.server.session_made(hosted.id)
                return success(request, {"cancelled": False, "sessionId": hosted.id})
            if request.type == "clone":
                hosted = await host.clone(self.hosted, session_id=made)
                await self.server.session_made(hosted.id)
                return success(request, {"cancelled": False, "sessionId": hosted.id})
            entry_id = request.get("entryId")
            if not isinstance(entry_id, str):
                raise PitrioError("fork: entryId must be a string")
            hosted, text = await host.fork(self.hosted, entry_id, session_id=made)
            await self.server.session_made(hosted.id)
            return success(
                request, {"text": text or "", "cancelled": False, "sessionId": hosted.id}
            )
        except PitrioError as exc:
            return failure(request, str(exc))

    async def _new_session(self, session_id: str | None) -> HostedSession:
        host = self.server.host
        if session_id is not None:
            try:
                return await host.open(session_id)  # a repeat: the one the first made
            except SessionNotFoundError:
                pass
        return await host.create(cwd=self.hosted.cwd, session_id=session_id)

    # -- sending ---------------------------------------------------------------------------

    def _encode(self, item: Sequenced | Outgoing | bytes) -> bytes:
        if isinstance(item, bytes):
            return item
        if isinstance(item, Outgoing):
            return safe_json_frame(item.payload)
        update = isinstance(item.event, MessageUpdate)
        if isinstance(item, FramedEvent) and (
            not update or (self.updates == "delta" and self._relay_deltas)
        ):
            return item.frame  # encoded once by the relay, for every client
        if not update:
            # Every other event has one form: the replay buffer's frame is it.
            cached = self.hosted.replay.get(item.seq)
            if cached is not None:
                return cached
        return event_frame(item.seq, item.event, self.updates)

    def _send_now(self, client: AttachedClient, item: FramedEvent) -> bool:
        """The relay's direct send (``AttachedClient.direct``): ``item`` written to the socket
        now, when it takes it (see ``DaemonWebSocket.send_frame_now``); the sender is woken
        only to write what the socket did not take."""
        if self._relay_deltas and self.updates == "delta":
            frame = item.frame  # what _encode gives a relayed event in this form, checked once
        else:
            try:
                frame = self._encode(item)
            except Exception:  # the queued path meets it again, and counts it
                return False
        ws = self.ws
        assert isinstance(ws, DaemonWebSocket)  # the only kind the relay is given this for
        if not ws.send_frame_now(frame):
            return False
        if ws.unsent:
            client.wake()
        return True

    async def _send_loop(self, client: AttachedClient) -> None:
        if isinstance(self.ws, DaemonWebSocket):
            client.direct = partial(self._send_now, client)  # no Python frame of its own
        try:
            await self._send_queued(client)
        finally:
            client.direct = None

    async def _send_queued(self, client: AttachedClient) -> None:
        batch = max(1, self.server.config.send_batch)
        while True:
            if isinstance(self.ws, DaemonWebSocket) and self.ws.unsent:
                self._sending_since = trio.current_time()
                try:
                    await self.ws.flush()
                except ConnectionClosed:
                    self.scope.cancel()
                    return
                finally:
                    self._sending_since = None
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
            # Everything already queued goes out in one write (up to ``batch`` frames): a
            # client that fell behind costs one system call per batch, not per frame.
            frames: list[bytes] = []
            closed = False
            while item is not None:
                try:
                    frames.append(self._encode(item))
                except Exception as exc:  # an event the encoder cannot write: skipped
                    self.server.counters["encode_errors"] += 1
                    log.warning(
                        "session %s: an event could not be encoded: %r", self.hosted.id, exc
                    )
                if isinstance(item, Outgoing) and item.payload.get("type") == "session_closed":
                    closed = True
                    break
                if len(frames) >= batch:
                    break
                item = client.feed.take()
            if frames:
                self._sending_since = trio.current_time()
                try:
                    await self._send_frames(frames)
                except ConnectionClosed:
                    self.scope.cancel()
                    return
                finally:
                    self._sending_since = None
            if closed:
                await self.close(CLOSE_NORMAL, "session closed")
                return

    async def _send_frames(self, frames: list[bytes]) -> None:
        send_frames = getattr(self.ws, "send_frames", None)
        if send_frames is None:  # a plain trio-websocket connection
            for frame in frames:
                await self.ws.send_message(frame.decode("utf-8"))
        else:
            await send_frames(frames)

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
