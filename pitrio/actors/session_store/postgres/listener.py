"""LISTEN in one dedicated thread, forwarding notifications into a bounded trio channel.

psycopg waits for notifications with a blocking call, so one thread (not a worker of
``trio.to_thread``: it lives as long as the daemon) holds its own connection, ``LISTEN``s on
the entries channel and hands each notification to trio through the run's
:class:`trio.lowlevel.TrioToken`. The channel is bounded: when it is full a notification is
dropped and counted, never waited for; notifications are hints, and the periodic catch-up by
sequence number finds whatever they missed. After a reconnect :class:`Reconnected` is sent,
because anything notified while the connection was down is lost.
"""

from __future__ import annotations

import logging
import threading

import attrs
import psycopg
import trio

from pitrio.actors.session_store.postgres.rows import parse_notification
from pitrio.actors.session_store.postgres.schema import NOTIFY_CHANNEL

log = logging.getLogger("pitrio.session_store.postgres")

POLL_SECONDS = 0.25
"""How often the thread looks at its stop flag while waiting."""


@attrs.frozen
class Appended:
    """Entries up to ``seq`` were committed to ``session_id``."""

    session_id: str
    seq: int


@attrs.frozen
class Reconnected:
    """The listening connection was (re)established: notifications may have been missed."""


Notice = Appended | Reconnected


class Listener:
    """The LISTEN thread; :meth:`run` it as a trio task, read :attr:`notices`."""

    def __init__(self, url: str, capacity: int = 1024) -> None:
        self.url = url
        self._send, self.notices = trio.open_memory_channel[Notice](capacity)
        self._stop = threading.Event()
        self.dropped = 0
        self.received = 0
        self.connected = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the thread, run until cancelled, then stop it and wait for it."""
        token = trio.lowlevel.current_trio_token()
        thread = threading.Thread(
            target=self._loop, args=(token,), name="pitrio-pg-listen", daemon=True
        )
        thread.start()
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self._stop.set()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(thread.join, 5.0)
            self._send.close()

    # -- the thread --------------------------------------------------------------------------

    def _post(self, token: trio.lowlevel.TrioToken, notice: Notice) -> bool:
        def put() -> None:
            try:
                self._send.send_nowait(notice)
            except trio.WouldBlock:
                self.dropped += 1  # the periodic catch-up heals it
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._stop.set()

        try:
            trio.from_thread.run_sync(put, trio_token=token)
        except trio.RunFinishedError:
            self._stop.set()
            return False
        return True

    def _loop(self, token: trio.lowlevel.TrioToken) -> None:
        delay = 0.1
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}".encode())
                    self.connected = True
                    delay = 0.1
                    if not self._post(token, Reconnected()):
                        return
                    while not self._stop.is_set():
                        for item in conn.notifies(timeout=POLL_SECONDS):
                            parsed = parse_notification(item.payload)
                            self.received += 1
                            if parsed is not None and not self._post(token, Appended(*parsed)):
                                return
            except psycopg.Error as exc:
                if self.connected:
                    log.warning("listening for session appends: connection lost: %s", exc)
                self.connected = False
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
        self.connected = False
