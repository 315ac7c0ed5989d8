"""The host actor: every session of a daemon, by id (``DESIGN.md`` §2, ``Host``).

It owns the registry of :class:`~pitrio.actors.host.hosted.HostedSession` objects and the
shared model router. Commands: create, get (lazily discovering a session's file), list (pi's
``SessionInfo`` fields plus the live state), close, delete, fork/clone, subscribe to host
events, stats, shutdown. Session trees run as tasks of the host's nursery, each in its own
nursery (:meth:`HostedSession._run_tree`), so one session's crash never reaches the host.

Long work (starting a session, stopping one) runs in tasks of the host, so the inbox keeps
answering; lookups that read the disk run in a worker thread inline, so two lookups of one id
never race to register it twice.
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import trio

from pitrio.actors._actor import Actor, Handle, Reply
from pitrio.actors.host.backend import SessionBackend
from pitrio.actors.host.commands import (
    Branch,
    Close,
    Create,
    Get,
    HostCommand,
    HostStats,
    ListSessions,
    Models,
    Rename,
    Shutdown,
    Stats,
    SubscribeHost,
)
from pitrio.actors.host.context import HostConfig, HostContext, HostEvent
from pitrio.actors.host.hosted import HostedSession
from pitrio.actors.host.index import SessionIndex
from pitrio.actors.host.listing import matches, search_terms, session_title
from pitrio.actors.host.models import model_choices
from pitrio.actors.host.policy import validate_session_id
from pitrio.actors.host.start_options import SessionStub
from pitrio.actors.model_router import ModelRouterHandle
from pitrio.actors.session.bootstrap import absolute_cwd
from pitrio.actors.session.trust_gate import TrustAsker
from pitrio.actors.session_store import SessionInfo, new_header
from pitrio.actors.session_store.paths import AGENT_DIR_ENV, session_dir, session_file_name
from pitrio.errors import PitrioError, SessionNotFoundError
from pitrio.logs import event as log_event
from pitrio.messages.ostext import check_os_text

log = logging.getLogger("pitrio.host")

LOGGED_EVENTS: dict[str, int] = {
    "session_created": logging.INFO,
    "session_opened": logging.INFO,
    "session_evicted": logging.INFO,
    "session_closed": logging.INFO,
    "session_deleted": logging.INFO,
    "session_restarted": logging.WARNING,
    "session_failed": logging.ERROR,
}
"""Host events written to the log, by level; the others (``session_busy``/``idle``: the run
events say more; the store's, logged by the store) only at ``debug``."""


def _iso(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def info_row(info: SessionInfo) -> dict[str, Any]:
    """pi's ``SessionInfo`` as JSON (camelCase, ISO times)."""
    row: dict[str, Any] = {
        "path": str(info.path),
        "id": info.id,
        "cwd": info.cwd,
    }
    if info.name is not None:
        row["name"] = info.name
    if info.parent_session_path is not None:
        row["parentSessionPath"] = info.parent_session_path
    row.update(
        created=_iso(info.created),
        modified=_iso(info.modified),
        messageCount=info.message_count,
        firstMessage=info.first_message,
        allMessagesText=info.all_messages_text,
    )
    return row


class Host(Actor[HostCommand]):
    """Owns the sessions of one daemon."""

    def __init__(self, router: ModelRouterHandle, config: HostConfig) -> None:
        super().__init__(name="host", capacity=256)
        self.router = router
        self.config = config
        self.sessions: dict[str, HostedSession] = {}
        flat = [Path(config.session_dir).expanduser()] if config.session_dir else []
        self.index = SessionIndex(config.agent_dir / "sessions", flat)
        self._subscribers: list[trio.MemorySendChannel[HostEvent]] = []
        self._context: HostContext | None = None
        self.evictions_total = 0

    @property
    def context(self) -> HostContext:
        """The context shared with hosted sessions."""
        assert self._context is not None
        return self._context

    async def started(self) -> None:
        self._context = HostContext(
            config=self.config, router=self.router, nursery=self.nursery, emit=self.emit
        )
        if self.config.eviction.check_interval() is not None:
            self.nursery.start_soon(self._evictor)
        if self.config.store is not None:
            self.nursery.start_soon(self._watch_store, self.config.store)

    async def _watch_store(self, store: SessionBackend) -> None:
        """Tell host subscribers and every session's clients when the shared store goes away
        (runs that append wait for it) and when it is back (they go on)."""
        while True:
            available = await store.wait_availability_change()
            event: HostEvent = {"type": "store_available" if available else "store_unavailable"}
            self.emit(event)
            for hosted in self.sessions.values():
                if hosted.clients:
                    hosted.notify({**event, "sessionId": hosted.id})

    async def stopping(self) -> None:
        await self._shutdown()
        for send in self._subscribers:
            send.close()

    # -- host events ---------------------------------------------------------------------------

    def emit(self, event: HostEvent) -> None:
        """Send a host event to every subscriber; one that cannot keep up is dropped. The
        session lifecycle is logged here too (:data:`LOGGED_EVENTS`)."""
        kind = event.get("type")
        level = LOGGED_EVENTS.get(kind, logging.DEBUG) if isinstance(kind, str) else logging.DEBUG
        if log.isEnabledFor(level):
            fields = {"session" if k == "sessionId" else k: v for k, v in event.items()}
            del fields["type"]
            log_event(log, str(kind), level, **fields)
        for send in list(self._subscribers):
            try:
                send.send_nowait(event)
            except trio.WouldBlock:
                send.close()  # too slow: its stream ends, it may subscribe again and list
                self._subscribers.remove(send)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(send)

    # -- commands ------------------------------------------------------------------------------

    async def handle(self, command: HostCommand) -> None:
        try:
            match command:
                case Create():
                    await self._create(command)
                case Get(session_id=session_id, reply=reply):
                    reply.set(await self._get(session_id))
                case ListSessions(reply=reply):
                    reply.set(await self._list())
                case Close(session_id=session_id, delete=delete, reply=reply):
                    hosted = await self._get(session_id)
                    self.nursery.start_soon(self._close, hosted, delete, reply)
                case Rename():
                    hosted = await self._get(command.session_id)
                    self.nursery.start_soon(self._rename, hosted, command)
                case Models():
                    self.nursery.start_soon(self._models, command)
                case Branch():
                    self.nursery.start_soon(self._branch, command)
                case SubscribeHost(reply=reply):
                    send, receive = trio.open_memory_channel[HostEvent](
                        self.config.host_event_capacity
                    )
                    self._subscribers.append(send)
                    reply.set(receive)
                case Stats(reply=reply):
                    reply.set(self._stats())
                case Shutdown(reply=reply):
                    await self._shutdown()
                    reply.set(None)
        except PitrioError as exc:
            command.reply.fail(exc)

    async def _create(self, command: Create) -> None:
        if self.context.shutting_down:
            raise PitrioError("The daemon is shutting down")
        known = None if command.session_id is None else self.sessions.get(command.session_id)
        if known is not None:  # a repeat of an idempotent create still starting: the same one
            self.nursery.start_soon(self._open_new, known, command.reply)
            return
        if command.cwd:  # a client's: strictly (the daemon's own default came from the OS)
            check_os_text(command.cwd, "cwd")
        cwd = absolute_cwd(command.cwd or self.config.default_cwd)
        if not await trio.Path(cwd).is_dir():
            raise PitrioError(f"Not a directory: {cwd}")
        model = command.model or self.config.default_model
        if model:
            await self.router.resolve_pattern(model)  # an unknown model fails the create
        header = new_header(cwd, session_id=command.session_id)
        path: Path | None = None
        if self.config.store is None:
            # The host's own agent dir, not the environment's: the index reads it back there.
            env = {**os.environ, AGENT_DIR_ENV: str(self.config.agent_dir)}
            directory = session_dir(cwd, override=self.config.session_dir, env=env)
            path = directory / session_file_name(header.timestamp, header.id)
        stub = SessionStub(
            header=header,
            model=model,
            thinking_level=command.thinking_level,
            name=command.name.strip() if command.name and command.name.strip() else None,
        )
        hosted = HostedSession(self.context, header.id, cwd=cwd, path=path, stub=stub)
        hosted.trust_asker = command.trust_asker
        self.sessions[hosted.id] = hosted
        self.emit({"type": "session_created", "sessionId": hosted.id})
        self.nursery.start_soon(self._open_new, hosted, command.reply)

    async def _open_new(self, hosted: HostedSession, reply: Reply[HostedSession]) -> None:
        try:
            await hosted.session()
        except PitrioError as exc:
            self.sessions.pop(hosted.id, None)
            reply.fail(exc)
        else:
            reply.set(hosted)

    async def _existing(self, session_id: str) -> HostedSession | None:
        """The session with this id if there is one (registered, in a file, in the store)."""
        try:
            return await self._get(session_id)
        except SessionNotFoundError:
            return None

    async def _get(self, session_id: str) -> HostedSession:
        session_id = validate_session_id(session_id)
        hosted = self.sessions.get(session_id)
        if hosted is not None:
            return hosted
        if self.config.store is not None:
            stored_cwd = await self.config.store.find(session_id)
            if stored_cwd is None:
                raise SessionNotFoundError(f"Session not found: {session_id}")
            hosted = self.sessions.get(session_id)  # registered while the query ran?
            if hosted is None:
                hosted = HostedSession(self.context, session_id, cwd=stored_cwd, path=None)
                self.sessions[session_id] = hosted
            return hosted
        path = await trio.to_thread.run_sync(self.index.find, session_id)
        if path is None:
            raise SessionNotFoundError(f"Session not found: {session_id}")
        info = await trio.to_thread.run_sync(self.index.info, path)
        cwd = info.cwd if info is not None and info.cwd else absolute_cwd(None)
        hosted = self.sessions.get(session_id)  # registered while the thread ran?
        if hosted is None:
            hosted = HostedSession(self.context, session_id, cwd=cwd, path=path)
            self.sessions[session_id] = hosted
        return hosted

    async def _list(self) -> list[dict[str, Any]]:
        if self.config.store is not None:
            infos = await self.config.store.list_infos()
        else:
            infos = await trio.to_thread.run_sync(self.index.all_infos)
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for info in infos:
            row = info_row(info)
            hosted = self.sessions.get(info.id)
            row.update(hosted.row() if hosted is not None else {"status": "evicted"})
            rows.append(row)
            seen.add(info.id)
        for hosted in self.sessions.values():
            if hosted.id in seen or hosted.status == "closed":
                continue
            stub = hosted.stub
            created = stub.header.timestamp if stub is not None else ""
            rows.append(
                {
                    "path": str(hosted.path) if hosted.path is not None else None,
                    "id": hosted.id,
                    "cwd": hosted.cwd,
                    **({"name": stub.name} if stub is not None and stub.name else {}),
                    "created": created,
                    "modified": created,
                    "messageCount": 0,
                    "firstMessage": "(no messages)",
                    "allMessagesText": "",
                    **hosted.row(),
                }
            )
        for row in rows:
            row["title"] = session_title(row)
        rows.sort(key=lambda row: str(row.get("modified", "")), reverse=True)
        return rows

    async def _close(self, hosted: HostedSession, delete: bool, reply: Reply[None]) -> None:
        try:
            await hosted.stop(delete=delete)
            if delete:
                self.sessions.pop(hosted.id, None)
                if self.config.store is not None:
                    await self.config.store.delete(hosted.id)
                path = hosted.path
                if path is not None:
                    await trio.to_thread.run_sync(_delete_files, path)
                    self.index.forget(path)
                self.emit({"type": "session_deleted", "sessionId": hosted.id})
            else:
                hosted.reset_failure()
                self.emit({"type": "session_closed", "sessionId": hosted.id})
        except PitrioError as exc:
            reply.fail(exc)
        else:
            reply.set(None)

    async def _rename(self, hosted: HostedSession, command: Rename) -> None:
        try:
            name = await hosted.rename(command.name)
        except PitrioError as exc:
            command.reply.fail(exc)
        else:
            self.emit({"type": "session_renamed", "sessionId": hosted.id, "name": name})
            command.reply.set(name)

    async def _models(self, command: Models) -> None:
        try:
            choices = await model_choices(
                self.router,
                agent_dir=self.config.agent_dir,
                cwd=command.cwd or self.config.default_cwd,
                daemon_model=self.config.default_model,
            )
        except PitrioError as exc:
            command.reply.fail(exc)
        else:
            command.reply.set(choices)

    async def _branch(self, command: Branch) -> None:
        try:
            source = await command.source.session()
            started = command.source.started
            assert started is not None
            if command.entry_id is None:
                result = await started.store.clone(session_id=command.session_id)
            else:
                result = await started.store.fork(
                    command.entry_id, position="before", session_id=command.session_id
                )
            del source
            if command.session_id is not None:
                existing = await self._existing(command.session_id)
                if existing is not None:  # a repeat (after a restart): the copy made before
                    await existing.session()
                    command.reply.set((existing, result.selected_text))
                    return
            seed = result.seed
            header = seed.header
            stub = SessionStub(header=header, seed_entries=seed.entries)
            hosted = HostedSession(
                self.context, header.id, cwd=header.cwd, path=seed.path, stub=stub
            )
            self.sessions[hosted.id] = hosted
            self.emit({"type": "session_created", "sessionId": hosted.id})
            await hosted.session()
        except PitrioError as exc:
            command.reply.fail(exc)
        else:
            command.reply.set((hosted, result.selected_text))

    def _stats(self) -> HostStats:
        counts: dict[str, int] = {}
        running = queued = clients = events = coalesced = dropped = replay = 0
        for hosted in self.sessions.values():
            counts[hosted.status] = counts.get(hosted.status, 0) + 1
            running += hosted.running
            queued += hosted.queued
            clients += len(hosted.clients)
            events += hosted.events_total
            coalesced += hosted.coalesced_total + sum(c.feed.coalesced for c in hosted.clients)
            dropped += hosted.dropped_clients
            replay += hosted.replay.stats().bytes
        return HostStats(
            sessions=counts,
            running=running,
            queued=queued,
            clients=clients,
            events_total=events,
            coalesced_total=coalesced,
            dropped_clients_total=dropped,
            restarts_total=self.context.restarts_total,
            replay_bytes=replay,
            evictions_total=self.evictions_total,
            host_subscribers=len(self._subscribers),
            store_metrics=(
                () if self.config.store is None else tuple(self.config.store.metric_values())
            ),
        )

    async def _shutdown(self) -> None:
        """Stop every session (abort runs, flush files); no session starts afterwards."""
        self.context.shutting_down = True
        async with trio.open_nursery() as nursery:
            for hosted in list(self.sessions.values()):
                if hosted.status in ("live", "starting", "stopping"):
                    nursery.start_soon(self._stop_quietly, hosted)

    async def _stop_quietly(self, hosted: HostedSession) -> None:
        try:
            await hosted.stop()
        except PitrioError as exc:
            log.warning("session %s: stop failed: %s", hosted.id, exc)

    # -- eviction ------------------------------------------------------------------------------

    async def _evictor(self) -> None:
        interval = self.config.eviction.check_interval()
        assert interval is not None
        while True:
            await trio.sleep(interval)
            now = trio.current_time()
            for hosted in list(self.sessions.values()):
                if hosted.status == "live" and self.config.eviction.should_evict(
                    now=now,
                    last_active=hosted.last_active,
                    clients=len(hosted.clients),
                    busy=hosted.running or hosted.queued > 0,
                ):
                    self.nursery.start_soon(self._evict, hosted)

    async def _evict(self, hosted: HostedSession) -> None:
        started = hosted.started
        if started is None or hosted.status != "live":
            return
        try:
            with trio.fail_after(STATE_SECONDS):
                state = await started.session.state()
        except (PitrioError, trio.TooSlowError):
            return  # a crashing or stuck session is the supervisor's business
        busy = state.is_running or state.is_compacting or state.pending_message_count > 0
        if busy or hosted.clients or hosted.status != "live" or hosted.started is not started:
            hosted.touch()
            return
        self.evictions_total += 1
        await self._stop_quietly(hosted)


STATE_SECONDS = 5.0


def _delete_files(path: Path) -> None:
    """Remove a session file and its lock file (nothing else)."""
    for target in (path, path.with_name(path.name + ".lock")):
        try:
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink()
        except FileNotFoundError:
            pass


class HostHandle(Handle[HostCommand]):
    """Typed access to the :class:`Host`."""

    async def create(
        self,
        *,
        cwd: str | None = None,
        model: str | None = None,
        thinking_level: str | None = None,
        name: str | None = None,
        trust_asker: TrustAsker | None = None,
        session_id: str | None = None,
    ) -> HostedSession:
        """A new session, started (its file is written with its first reply).

        ``trust_asker``: the creating client answers the project-trust dialog when the rules
        ask (:mod:`pitrio.actors.session.resources.trust`); ``None``: "ask" means untrusted.
        ``session_id``: its id (an idempotent create's, :func:`idempotent_session_id`); a
        session registered with it already is answered instead.
        """
        return await self.ask(
            lambda reply: Create(cwd, model, thinking_level, name, reply, trust_asker, session_id)
        )

    async def get(self, session_id: str) -> HostedSession:
        """The session with this id (known, or found on disk); it is not started."""
        return await self.ask(lambda reply: Get(session_id, reply))

    async def open(self, session_id: str) -> HostedSession:
        """The session with this id, started."""
        hosted = await self.get(session_id)
        await hosted.session()
        return hosted

    async def search(self, query: str) -> list[dict[str, Any]]:
        """The sessions whose name, messages or id hold every word of ``query``, newest
        first (:func:`~pitrio.actors.host.listing.matches`)."""
        terms = search_terms(query)
        return [row for row in await self.list() if matches(row, terms)]

    async def list(self) -> list[dict[str, Any]]:
        """Every session: pi's ``SessionInfo`` fields plus the live state, newest first."""
        return await self.ask(ListSessions)

    async def rename(self, session_id: str, name: str) -> str:
        """Name the session (pi's ``session_info`` entry; it is started if it was not);
        the trimmed name. An empty name is refused."""
        return await self.ask(lambda reply: Rename(session_id, name, reply))

    async def models(self, cwd: str | None = None) -> dict[str, Any]:
        """The models a new session may use and the default one (:mod:`.models`)."""
        return await self.ask(lambda reply: Models(cwd, reply))

    async def close(self, session_id: str) -> None:
        """Stop the session now (abort, flush, unload); a failed one may be opened again."""
        await self.ask(lambda reply: Close(session_id, False, reply))

    async def delete(self, session_id: str) -> None:
        """Stop the session and delete its file."""
        await self.ask(lambda reply: Close(session_id, True, reply))

    async def fork(
        self, source: HostedSession, entry_id: str, *, session_id: str | None = None
    ) -> tuple[HostedSession, str | None]:
        """A new session holding ``source``'s path before a user message, and that text
        (``session_id``: its id; a session with it already is answered instead)."""
        return await self.ask(lambda reply: Branch(source, entry_id, reply, session_id))

    async def clone(self, source: HostedSession, *, session_id: str | None = None) -> HostedSession:
        """A new session holding ``source``'s current branch (``session_id`` as for fork)."""
        result: tuple[HostedSession, str | None] = await self.ask(
            lambda reply: Branch(source, None, reply, session_id)
        )
        return result[0]

    async def subscribe(self) -> trio.MemoryReceiveChannel[HostEvent]:
        """Host events from now on (a subscriber that falls behind is dropped)."""
        return await self.ask(SubscribeHost)

    async def host_stats(self) -> HostStats:
        """Counters for metrics."""
        return await self.ask(Stats)

    async def shutdown(self) -> None:
        """Abort every run, flush and stop every session; refuse new ones."""
        await self.ask(Shutdown)


async def start_host(
    nursery: trio.Nursery, router: ModelRouterHandle, config: HostConfig
) -> HostHandle:
    """Start a :class:`Host` in ``nursery``; returns its handle."""
    return HostHandle(await nursery.start(Host(router, config).run))
