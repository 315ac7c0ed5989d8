"""Actor conventions shared by every actor of pitrio.

An actor is a task that owns some state and a bounded *inbox* of commands. Nobody else touches
its state: others hold a *handle* whose typed async methods send a command and await the one-shot
:class:`Reply` it carries. An actor starts through ``nursery.start`` (so the caller gets the
handle once the actor is ready) and stops cleanly when its inbox closes (every handle clone is
closed) or when its nursery is cancelled. When it stops, every reply still pending fails with
:class:`~pitrio.errors.ActorStoppedError`, so no caller waits forever.

A complete tiny actor::

    @attrs.frozen
    class Add:
        amount: int
        reply: Reply[int]

    class Counter(Actor[Add]):
        def __init__(self) -> None:
            super().__init__(name="counter", capacity=16)
            self.total = 0  # state: touched only by this actor's own tasks

        async def handle(self, command: Add) -> None:
            self.total += command.amount
            command.reply.set(self.total)

    class CounterHandle(Handle[Add]):
        async def add(self, amount: int) -> int:
            return await self.ask(lambda reply: Add(amount, reply))

    async with trio.open_nursery() as nursery:
        counter = CounterHandle(await nursery.start(Counter().run))
        assert await counter.add(2) == 2
        await counter.aclose()   # the inbox closes; Counter.run returns

Overflow policy: a full inbox blocks the sender (back-pressure); commands are handled in arrival
order. An actor that must keep serving while a long command runs starts that work as a task in
its own nursery (:attr:`Actor.nursery`); such tasks belong to the actor and may touch its state.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs
import outcome
import trio

from pitrio.errors import ActorStoppedError, ReplyTimeoutError

C = TypeVar("C")
T = TypeVar("T")


class Reply(Generic[T]):
    """A one-shot answer to one command: set exactly once, awaited by exactly one caller."""

    __slots__ = ("__weakref__", "_done", "_link", "_outcome")

    def __init__(self, link: _Link | None = None) -> None:
        self._done = trio.Event()
        self._outcome: outcome.Outcome[T] | None = None
        self._link = link
        if link is not None:
            link.pending.add(self)

    @property
    def is_set(self) -> bool:
        """Whether the answer (value or error) has been given."""
        return self._outcome is not None

    def set(self, value: T) -> None:
        """Answer with ``value``; a second answer is ignored (the first one wins)."""
        self._resolve(outcome.Value(value))

    def fail(self, error: BaseException) -> None:
        """Answer with an error the caller will see raised; ignored if already answered."""
        self._resolve(outcome.Error(error))

    def _resolve(self, result: outcome.Outcome[T]) -> None:
        if self._outcome is not None:
            return
        self._outcome = result
        if self._link is not None:
            self._link.pending.discard(self)
        self._done.set()

    async def wait(self) -> T:
        """Wait for the answer and return it (or raise the error it carries)."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome.unwrap()


class _Link:
    """What handles and their actor share: the replies in flight and whether the actor stopped."""

    __slots__ = ("pending", "stopped")

    def __init__(self) -> None:
        self.pending: weakref.WeakSet[Reply[Any]] = weakref.WeakSet()
        self.stopped: BaseException | None = None

    def stop(self, reason: BaseException) -> None:
        self.stopped = reason
        for reply in list(self.pending):
            reply.fail(reason)


@attrs.frozen
class InboxStats:
    """A snapshot of an actor's inbox: how full it is and how much went through it."""

    name: str
    capacity: int
    queued: int
    high_water: int
    received: int
    senders_waiting: int


class Address(Generic[C]):
    """The send side of an actor's inbox plus its link; what :class:`Handle` wraps."""

    __slots__ = ("_actor", "link", "name", "send_channel")

    def __init__(
        self, name: str, send_channel: trio.MemorySendChannel[C], link: _Link, actor: Actor[C]
    ) -> None:
        self.name = name
        self.send_channel = send_channel
        self.link = link
        self._actor = actor

    def stats(self) -> InboxStats:
        """Statistics of the actor's inbox."""
        return self._actor.inbox_stats()


class Handle(Generic[C]):
    """Typed access to an actor: subclasses add one async method per command."""

    def __init__(self, address: Address[C]) -> None:
        self._address = address

    @property
    def name(self) -> str:
        """The actor's name, for logs and errors."""
        return self._address.name

    def stats(self) -> InboxStats:
        """Statistics of the actor's inbox."""
        return self._address.stats()

    async def tell(self, command: C) -> None:
        """Send a command that expects no answer; blocks while the inbox is full."""
        self._check_alive()
        channel = self._address.send_channel
        try:
            # ``send`` without its trailing task switch when the inbox has room: a cancelled
            # caller still sends nothing, but a round trip costs one scheduling step fewer
            # (issue 7: a turn makes about ten).
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                channel.send_nowait(command)
            except trio.WouldBlock:
                await channel.send(command)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ActorStoppedError(f"actor {self.name} has stopped") from exc

    async def ask(self, make: Callable[[Reply[T]], C], *, within: float | None = None) -> T:
        """Send ``make(reply)`` and await the reply, for at most ``within`` seconds if given.

        Raises :class:`ActorStoppedError` if the actor stops before answering and
        :class:`ReplyTimeoutError` if the deadline passes first.
        """
        reply: Reply[T] = Reply(self._address.link)
        if within is None:
            await self.tell(make(reply))
            return await reply.wait()
        with trio.move_on_after(within) as scope:
            await self.tell(make(reply))
            return await reply.wait()
        assert scope.cancelled_caught
        raise ReplyTimeoutError(f"actor {self.name} did not answer within {within} s")

    def new_reply(self) -> Reply[T]:
        """A reply that fails if this actor stops, for commands built by hand."""
        return Reply(self._address.link)

    async def aclose(self) -> None:
        """Close this handle's send side; the actor stops once every clone is closed."""
        await self._address.send_channel.aclose()

    def _check_alive(self) -> None:
        stopped = self._address.link.stopped
        if stopped is not None:
            raise ActorStoppedError(f"actor {self.name} has stopped") from stopped


class Actor(Generic[C]):
    """Base class: a bounded inbox, a nursery, and a loop calling :meth:`handle` per command."""

    def __init__(self, *, name: str, capacity: int = 64) -> None:
        self.name = name
        self._capacity = capacity
        self._send, self._receive = trio.open_memory_channel[C](capacity)
        self._link = _Link()
        self._high_water = 0
        self._received = 0
        self._nursery: trio.Nursery | None = None
        self.address = Address(name, self._send, self._link, self)

    @property
    def nursery(self) -> trio.Nursery:
        """The actor's own nursery, for tasks it starts (they end when the actor ends)."""
        assert self._nursery is not None, "the actor is not running"
        return self._nursery

    def inbox_stats(self) -> InboxStats:
        """A snapshot of this actor's inbox statistics."""
        stats = self._receive.statistics()
        return InboxStats(
            name=self.name,
            capacity=self._capacity,
            queued=stats.current_buffer_used,
            high_water=self._high_water,
            received=self._received,
            senders_waiting=stats.tasks_waiting_send,
        )

    async def run(
        self, *, task_status: trio.TaskStatus[Address[C]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the actor until its inbox closes; pass this to ``nursery.start``."""
        stop_reason: BaseException = ActorStoppedError(f"actor {self.name} has stopped")
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.started()
                task_status.started(self.address)
                async with self._receive:
                    async for command in self._receive:
                        self._received += 1
                        queued = self._receive.statistics().current_buffer_used + 1
                        self._high_water = max(self._high_water, queued)
                        await self.handle(command)
                await self.stopping()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            stop_reason = ActorStoppedError(f"actor {self.name} failed: {exc!r}")
            stop_reason.__cause__ = exc
            raise
        finally:
            self._nursery = None
            self._link.stop(stop_reason)

    async def started(self) -> None:
        """Hook: runs inside the actor's nursery before the handle is handed out."""

    async def stopping(self) -> None:
        """Hook: runs when the inbox has closed, before the actor's own tasks are cancelled."""

    async def handle(self, command: C) -> None:
        """Handle one command; subclasses implement this with ``match``."""
        raise NotImplementedError
