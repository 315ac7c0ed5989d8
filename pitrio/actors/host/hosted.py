"""One session as the host keeps it: live, evicted, restarting or failed, behind one stream.

A :class:`HostedSession` outlives the actors of its session. It owns what clients need across
evictions and restarts: the per-session sequence numbers (``seq``, counted by the host, so they
keep growing when a new actor starts at 1 again), the :class:`ReplayBuffer`, the attached
clients (each a :class:`~pitrio.actors.host.feed.ClientFeed`), its activity (:mod:`.activity`)
and the supervision of the session's actor tree (clients are told with :mod:`.notices`):

* the tree runs in its own nursery inside a *supervisor* task of the host (one-for-all: a
  crash of any of its actors ends the tree);
* a crash restarts the tree from the session's file while :class:`RestartPolicy` allows it,
  then the session is marked failed with the reason; clients are told either way;
* a stop (eviction, close, shutdown) aborts a run, flushes the store and cancels the tree.

The host actor creates, looks up and stops hosted sessions; connection tasks call
:meth:`HostedSession.session`, :meth:`attach`, :meth:`resume` and :meth:`barrier` directly. They
are safe to call from any task of the daemon: each either completes without awaiting or only
waits for the supervisor to change the status (trio's cooperative scheduling, as in the actors'
own nurseries, ``DESIGN-NOTES.md`` "Actors").
"""

from __future__ import annotations

import gc
import logging
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors.host import notices
from pitrio.actors.host.activity import Activity
from pitrio.actors.host.attached import AttachedClient
from pitrio.actors.host.crashes import crash_reason, owned_elsewhere
from pitrio.actors.host.dialogs import OpenDialogs
from pitrio.actors.host.feed import DEFAULT_CLIENT_CAPACITY, ClientFeed, framed_event
from pitrio.actors.host.policy import RestartHistory
from pitrio.actors.host.replay import ReplayBuffer
from pitrio.actors.host.start_options import SessionStub, kept_stub, start_options
from pitrio.actors.session.bootstrap import SessionOptions, StartedSession, start_session
from pitrio.actors.session.command_ledger import CommandLedger
from pitrio.actors.session.fanout import Offer, Sequenced
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session.trust_gate import TrustAsker
from pitrio.actors.session_store.command_stamp import stamping
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.errors import ActorStoppedError, PitrioError, SessionNotFoundError
from pitrio.messages.events import ExtensionUiRequest, MessageUpdate
from pitrio.messages.shared import shared_system_json, system_messages

if TYPE_CHECKING:
    from pitrio.actors.host.backend import SessionBackend
    from pitrio.actors.host.context import FrameEncoder, HostContext

log = logging.getLogger("pitrio.host")

SessionStatus = Literal["evicted", "starting", "live", "stopping", "failed", "closed"]

STOP_SECONDS = 8.0
"""A stop's abort-and-flush deadline (the daemon must exit within 10 s of SIGTERM)."""
BARRIER_SECONDS = 10.0


class SessionFailedError(PitrioError):
    """The session crashed more often than its restart policy allows."""


class SessionClosedError(SessionNotFoundError):
    """The session was deleted while a client was waiting for it."""


class HostedSession:
    """A session known to the host (see the module docstring)."""

    # Slots: a daemon holds one per session, live or evicted, and its 30 attributes were past
    # what an instance dict shares keys for (a 1.6 KB dict each; 10,000 sessions: 16 MB).
    __slots__ = (
        "_actor_seq",
        "_changed",
        "_context",
        "_offset",
        "_progress",
        "_stop_requested",
        "_stop_scope",
        "_stopped",
        "activity",
        "clients",
        "coalesced_total",
        "cwd",
        "dialogs",
        "dropped_clients",
        "elsewhere",
        "epoch",
        "events_total",
        "failure",
        "history",
        "id",
        "last_active",
        "ledger",
        "path",
        "project_trust",
        "replay",
        "restarts",
        "seq",
        "started",
        "status",
        "stub",
        "trust_asker",
    )

    def __init__(
        self,
        context: HostContext,
        session_id: str,
        *,
        cwd: str,
        path: Path | None,
        stub: SessionStub | None = None,
    ) -> None:
        self._context = context
        self.id = session_id
        self.cwd = cwd
        self.path = path
        self.stub = stub
        self.trust_asker: TrustAsker | None = None
        """Asks the creating client about project trust, at the first start only."""
        self.ledger: CommandLedger | None = None
        """The client command ids taken (exactly once; made and seeded from the session's
        entries by the first command that carries an id, kept across restarts of the tree)."""
        self.project_trust: bool | None = None
        """The project-trust decision of the first start, kept for restarts."""
        self.epoch = secrets.token_hex(6)
        """Names this stream of sequence numbers (new when the daemon restarts)."""
        self.status: SessionStatus = "evicted"
        self.failure: str | None = None
        self.history = RestartHistory()
        self.restarts = 0
        self.seq = 0
        self.replay = ReplayBuffer(context.config.replay_frames, context.config.replay_bytes)
        self.dialogs = OpenDialogs()
        """Extension dialogs waiting for an answer: shown to clients that attach later."""
        self.clients: list[AttachedClient] = []
        self.started: StartedSession | None = None
        self.activity = Activity(session_id, context.emit)
        """A run in progress, the messages queued, the runs' log lines (kept across restarts)."""
        self.last_active = trio.current_time()
        self.events_total = 0
        self.coalesced_total = 0
        self.dropped_clients = 0
        self._actor_seq = 0
        self._offset = 0
        self._changed = trio.Event()
        self._progress: trio.Event | None = None
        self._stop_scope: trio.CancelScope | None = None
        self._stop_requested = False
        self._stopped = trio.Event()
        self._stopped.set()
        self.elsewhere: SessionOwnedElsewhereError | None = None
        """Set when the last start found the session held by another daemon (shared store)."""

    # -- status ------------------------------------------------------------------------------

    def _set_status(self, status: SessionStatus) -> None:
        self.status = status
        self._changed.set()
        self._changed = trio.Event()

    def touch(self) -> None:
        """Record activity (postpones eviction)."""
        self.last_active = trio.current_time()

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self.activity.running

    @property
    def queued(self) -> int:
        """How many steering and follow-up messages wait."""
        return self.activity.queued

    @property
    def persisted(self) -> bool:
        """Whether the session's file exists."""
        return self.path is not None and self.path.exists()

    def row(self) -> dict[str, Any]:
        """The live part of a session listing."""
        row: dict[str, Any] = {
            "status": self.status,
            "isStreaming": self.running,
            "pendingMessageCount": self.queued,
            "clients": len(self.clients),
            "seq": self.seq,
            "stream": self.epoch,
            "restarts": self.restarts,
        }
        if self.failure is not None:
            row["failure"] = self.failure
        return row

    # -- access ------------------------------------------------------------------------------

    async def session(self) -> SessionHandle:
        """The live session's handle; starts (reopens) it when it is not in memory."""
        self.touch()
        tried = False
        while True:
            if self.status == "live" and self.started is not None:
                return self.started.session
            if self.status == "failed":
                raise SessionFailedError(f"Session {self.id} failed: {self.failure}")
            if self.status == "closed":
                raise SessionClosedError(f"Session {self.id} was closed")
            if self.status == "evicted":
                if tried and self.elsewhere is not None:
                    raise self.elsewhere  # another daemon holds it: the caller says which
                self.elsewhere = None
                tried = True
                self.start()
            changed = self._changed
            await changed.wait()

    def start(self) -> None:
        """Start the session's tree if it is not in memory (returns at once)."""
        if self.status != "evicted":
            return
        if self._context.shutting_down:
            raise PitrioError("The daemon is shutting down")
        self._set_status("starting")
        self._stopped = trio.Event()
        # Loaded again: the ids are read from the entries again, which may hold commands
        # another daemon applied while it had the session (a shared store).
        self.ledger = None
        # A task inherits its starter's context: a client command being applied (its id
        # stamped on entries) must not stamp every entry of the tree it happened to start.
        with stamping(None):
            self._context.nursery.start_soon(self._supervise)

    async def stop(self, *, delete: bool = False) -> None:
        """Abort a run, flush and stop the tree (if it runs); wait until it has stopped.

        The session ends ``evicted`` (a failed one stays failed), or ``closed`` with
        ``delete`` (attached clients are told and the session is forgotten)."""
        while self.status == "starting":
            await self._changed.wait()
        if self.status == "live":
            self._set_status("stopping")
            self._stop_requested = True
            await self._flush()
            if self._stop_scope is not None:
                self._stop_scope.cancel()
        await self._stopped.wait()
        if delete:
            self._set_status("closed")
            self._notify(notices.closed(self.id))

    def reset_failure(self) -> None:
        """Forget a failure: the next access starts the session again."""
        if self.status == "failed":
            self.failure = None
            self.history = RestartHistory()
            self._set_status("evicted")

    async def _flush(self) -> None:
        started = self.started
        if started is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(STOP_SECONDS):
            try:
                if not await self._persisted_now(started):
                    await self._capture_stub(started)
                await started.session.abort()
                await started.session.abort_bash()
                await started.store.flush()
            except PitrioError as exc:
                log.warning("session %s: flush before stop failed: %s", self.id, exc)

    async def _persisted_now(self, started: StartedSession) -> bool:
        """Whether the session is stored yet (a file, or a shared store's row)."""
        if self._context.config.store is None:
            return self.persisted
        return (await started.store.status()).persisted

    async def _capture_stub(self, started: StartedSession) -> None:
        """An unwritten session keeps its model, level and name for its next start."""
        state = await started.session.state()
        self.stub = kept_stub(self.stub, started.store.header, state)

    async def rename(self, name: str) -> str:
        """Name the session (started if it is not); the name as stored (trimmed)."""
        stored = await (await self.session()).set_session_name(name)
        if self.stub is not None:  # listed from the stub until its file exists
            self.stub = attrs.evolve(self.stub, name=stored)
        return stored

    # -- clients -----------------------------------------------------------------------------

    def attach(
        self, capacity: int = DEFAULT_CLIENT_CAPACITY, *, since: int | None = None
    ) -> AttachedClient:
        """A new client: it gets every event from now on, an ``attached`` frame first (first
        also before a replay from ``since``, see :meth:`resume`)."""
        client = AttachedClient(self, ClientFeed(capacity))
        client.feed.sent_seq = client.feed.attached_seq = self.seq
        self.clients.append(client)
        self.touch()
        hello_after = self.seq if since is None else min(self.seq, since)
        client.push(self.hello(), after_seq=hello_after)
        for frame in self.dialogs.still_open(trio.current_time()):
            client.push(frame, after_seq=hello_after)
        return client

    def hello(self) -> dict[str, Any]:
        """The frame a client gets when it attaches."""
        return {"type": "attached", "sessionId": self.id, **self.row()}

    def drop_client(self, client: AttachedClient) -> None:
        """Forget ``client`` (its :meth:`AttachedClient.detach`), keeping what its feed
        coalesced in the session's count."""
        if client in self.clients:
            self.clients.remove(client)
        self.coalesced_total += client.feed.coalesced
        self.touch()

    def resume(self, client: AttachedClient, since: int, stream: str | None) -> int | None:
        """Replay what ``client`` missed after ``since``: the number of frames queued, or
        ``None`` when they are gone (the client must reload: ``resync``)."""
        if stream is not None and stream != self.epoch:
            return None
        frames = self.replay.since(since)
        if frames is None:
            return None
        queued = client.feed.resume(frames, self.replay.last_seq)
        client.wake()
        return queued

    async def barrier(self, handle: SessionHandle) -> int:
        """The seq of the last event the session emitted so far, once the host has relayed it
        (a command's response goes after its events)."""
        try:
            target = await handle.emitted_seq()
        except PitrioError:
            return self.seq
        started = self.started
        with trio.move_on_after(BARRIER_SECONDS):
            while (
                self.started is started
                and started is not None
                and started.session is handle
                and self._actor_seq < target
            ):
                if self._progress is None:
                    self._progress = trio.Event()
                await self._progress.wait()
        if self.started is not started or self._actor_seq < target:
            return self.seq
        return target + self._offset

    def _notify(self, payload: dict[str, Any]) -> None:
        for client in list(self.clients):
            client.push({**payload, "seq": self.seq})

    @property
    def frame_encoder(self) -> FrameEncoder:
        """How this session's events are encoded for the replay buffer (and ``FramedEvent``)."""
        return self._context.config.encode_frame

    @property
    def store(self) -> SessionBackend | None:
        """The shared store sessions live in (``None``: session files)."""
        return self._context.config.store

    def notify(self, payload: dict[str, Any]) -> None:
        """Send a notice to every attached client, after the events sent so far."""
        self._notify(payload)

    # -- the event pump ----------------------------------------------------------------------

    def _relay(self, item: Sequenced) -> None:
        event = item.event
        self.seq += 1
        self._actor_seq = item.seq
        self._offset = self.seq - item.seq
        self.events_total += 1
        seq = self.seq
        frame = self._context.config.encode_frame(seq, event)
        carried = system_messages(event)
        # A system message's sections and tools (~5 KB, in four frames of a first run) are
        # held once for every session; the clients get the frame as it is.
        self.replay.append(seq, shared_system_json(frame, carried) if carried else frame)
        if isinstance(event, ExtensionUiRequest):
            self.dialogs.asked(event, frame, trio.current_time())
        relayed = framed_event(seq, event, frame)
        for client in list(self.clients):
            feed = client.feed
            direct = client.direct
            if direct is not None and feed.idle() and direct(relayed):
                feed.sent_seq = seq
                continue
            # Counted when this event cuts the client off, not for each event offered to it
            # until it is detached (the load benchmark saw one slow client counted 192 times).
            open_before = client.feed.closed_reason is None
            if client.feed.offer(relayed) is Offer.OVERFLOW and open_before:
                self.dropped_clients += 1
            client.wake()
        now = self.last_active = trio.current_time()
        if type(event) is not MessageUpdate:  # most events of a run: nothing to track
            self.activity.observe(event, now)
        if self._progress is not None:
            self._progress.set()
            self._progress = None

    # -- supervision -------------------------------------------------------------------------

    def _options(self) -> SessionOptions:
        options = start_options(
            self._context.config,
            session_id=self.id,
            cwd=self.cwd,
            path=self.path,
            persisted=self.persisted,
            stub=self.stub,
        )
        return attrs.evolve(options, project_trust=self.project_trust, trust_asker=self.trust_asker)

    async def _supervise(self) -> None:
        """Run the tree until stopped; restart it after crashes while the policy allows."""
        try:
            await self._supervise_tree()
        except Exception as exc:
            # A bug in the supervision itself: this session fails, the daemon goes on.
            log.exception("session %s: supervisor failed", self.id)
            self.failure = f"{type(exc).__name__}: {exc}"
            self._set_status("failed")
        finally:
            self._stop_requested = False
            self._stopped.set()

    async def _supervise_tree(self) -> None:
        while True:
            crash = await self._run_tree()
            self.started = None
            self.activity.ended()
            self.dialogs.clear()
            if crash is None:
                # The stopped tree is cyclic garbage (the actors' frames are held by the
                # tracebacks of the cancellations that stopped them): a collection of the
                # young generations now frees it while it is young, a millisecond or two,
                # instead of it being promoted and pushing the collector toward a full
                # collection of the whole daemon's heap during some later request. Not at
                # shutdown: thousands of sessions stop then, and the process is ending.
                if not self._context.shutting_down:
                    gc.collect(1)
                self.replay.reset(self.seq)  # an evicted session keeps only its numbering
                # Its ids are read again from its entries when it is next loaded (memory:
                # a daemon holds thousands of evicted sessions).
                self.ledger = None
                self._set_status("evicted")
                self._context.emit({"type": "session_evicted", "sessionId": self.id})
                return
            now = trio.current_time()
            decision = self.history.after_crash(now, self._context.config.restart)
            self.history = decision.history
            self.replay.reset(self.seq)  # what clients held is stale: resume -> resync
            if not decision.allowed or self._context.shutting_down:
                self.failure = crash
                self._set_status("failed")
                failed = notices.failed(self.id, crash)
                self._notify(failed)
                self._context.emit(failed)
                return
            self.restarts += 1
            self._context.restarts_total += 1
            # The crashed tree's entries not yet stored died with it: an id answered from
            # memory would say "done" for a command nothing durable shows (a prompt accepted
            # while the database was down). Read the ids again from what was stored.
            self.ledger = None
            notice = notices.restarted(self.id, crash, self.restarts)
            self._notify(notice)
            self._context.emit(notice)
            self._set_status("starting")

    async def _run_tree(self) -> str | None:
        """One life of the session's tree: ``None`` when stopped on request, else the crash."""
        scope = trio.CancelScope()
        self._stop_scope = scope
        try:
            with scope:
                async with trio.open_nursery() as nursery:
                    await self._start_in(nursery)
                    assert self.started is not None
                    if self.store is not None:  # shared: another daemon may take it
                        nursery.start_soon(self._hand_over, self.started)
                    while True:
                        # The relay is a sink of the session's outlet: each event is relayed
                        # in the task that emits it (the relay only queues for clients, never
                        # waits), with no buffer, channel or feeder task between (issue 38:
                        # an idle session held all three). This task waits for the end.
                        ended = trio.Event()
                        await self.started.session.subscribe_sink(self._relay, ended.set)
                        await ended.wait()
                        # Delivery ended. The tree is going down (this task is about to be
                        # cancelled and the crash reported); should the session answer
                        # still, the stream has a gap and clients must reload.
                        await self.started.session.state()
                        self.replay.reset(self.seq)
                        self._notify(notices.event_gap(self.id))
        except BaseException as exc:
            moved = owned_elsewhere(exc)
            if moved is not None:
                # Not a crash: another daemon runs it. Clients are told where; the session
                # stays unloaded here and the next access tries again.
                self.elsewhere = moved
                self._notify(notices.owned_elsewhere(self.id, moved))
                return None
            reason = crash_reason(exc)
            if reason is None:
                if self._stop_requested and scope.cancelled_caught:
                    return None
                raise
            return reason
        finally:
            self._stop_scope = None
        if self._stop_requested:
            return None
        return "the session stopped by itself"

    async def _hand_over(self, started: StartedSession) -> None:
        """Once another daemon has taken the lease (the store is read-only by then): abort,
        flush, and raise the refusal into the tree, handled as at a start (clients are told
        ``session_owned_elsewhere``, the session is left unloaded)."""
        try:
            moved = await started.store.lease_moved()
        except ActorStoppedError:
            return  # the store ended first: the tree reports why
        await self._flush()  # nothing acknowledged is lost: every such entry is committed
        raise moved

    async def _start_in(self, nursery: trio.Nursery) -> None:
        started = await start_session(nursery, self._context.router, self._options())
        self.started = started
        self.project_trust = started.project_trusted
        self.trust_asker = None  # the creating client was asked once
        if self.path is None and started.store.path is not None:
            self.path = started.store.path
        stub = self.stub
        if stub is not None and stub.name and not await self._persisted_now(started):
            await started.session.set_session_name(stub.name)
        self.failure = None
        self._set_status("live")
        self._context.emit({"type": "session_opened", "sessionId": self.id})
        self.touch()
