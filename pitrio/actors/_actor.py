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

Tracing (issue 10, ``pitrio.actors.trace``): an :class:`InboxTracer` attached with
:meth:`Handle.trace` is told of every command put into and taken out of the inbox. With no
tracer attached the cost is one attribute test per send and per receive. :func:`current_actor`
names the actor whose task is running (an actor's tasks inherit it), so a tracer can say who
sent a command.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import attrs
import outcome
import trio

from pitrio.errors import ActorStoppedError, ReplyTimeoutError, unwrap_group

C = TypeVar("C")
T = TypeVar("T")

_CURRENT_ACTOR: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pitrio_actor", default=None
)


def current_actor() -> str | None:
    """The name of the actor whose task calls this (``None`` outside every actor).

    :meth:`Actor.run` sets it in its own task; trio hands a copy of the spawning task's context
    to each task it starts, so the tasks an actor starts carry its name too.
    """
    return _CURRENT_ACTOR.get()


def buffered(channel: trio.MemorySendChannel[Any] | trio.MemoryReceiveChannel[Any]) -> int:
    """How many items wait in ``channel``'s buffer: ``statistics().current_buffer_used``
    without building the statistics object (seven fields, ~1 µs: asked for every streamed
    delta, issue 38). Reads the memory channel's state, which trio does not document; a test
    holds it to ``statistics()``, and any other channel is asked the documented way."""
    state = getattr(channel, "_state", None)
    data = getattr(state, "data", None)
    if data is None:
        return channel.statistics().current_buffer_used
    return len(data)


class Reply(Generic[T]):
    """A one-shot answer to one command: set exactly once, awaited by exactly one caller."""

    __slots__ = ("__weakref__", "_done", "_link", "_outcome")

    def __init__(self, link: _Link | None = None) -> None:
        self._done = trio.Event()
        self._outcome: outcome.Outcome[T] | None = None
        self._link = link
        if link is not None:
            link.add(self)

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
        link = self._link
        if link is not None:
            link.settled(self)
        self._done.set()

    async def wait(self) -> T:
        """Wait for the answer and return it (or raise the error it carries)."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome.unwrap()


class InboxTracer(Protocol):
    """Told of inbox traffic when tracing is on; must not block or raise (it runs inline)."""

    def on_send(self, actor: str, command: object, depth: int) -> None:
        """``command`` is being put into ``actor``'s inbox, which holds ``depth`` commands
        before it (``depth`` equal to the capacity: the sender blocks until there is room)."""

    def on_receive(self, actor: str, command: object, depth: int) -> None:
        """``actor`` took ``command`` from its inbox; ``depth`` commands are still queued."""

    def on_handled(self, actor: str, command: object) -> None:
        """``actor``'s :meth:`Actor.handle` returned for ``command`` (its effects are done or
        handed to tasks of the actor)."""


class _Link:
    """What handles and their actor share: the replies in flight and whether the actor stopped."""

    __slots__ = ("_prune_at", "pending", "stopped")

    def __init__(self) -> None:
        # Weak references in a plain set, not a WeakSet: an idle actor's empty WeakSet costs
        # about 700 bytes (its set, callback and bookkeeping), a set 200, and a daemon holds
        # five actors per idle session. A reply answered takes its reference out; one dropped
        # unanswered leaves a dead reference, pruned when the set has doubled. No set while
        # none is in flight (an idle actor's empty set is 216 bytes, five per idle session;
        # a set never shrinks its table once grown): made by the first reply, dropped when
        # the last one is answered.
        self.pending: set[weakref.ref[Reply[Any]]] | None = None
        self.stopped: BaseException | None = None
        self._prune_at = _PRUNE_AT

    def add(self, reply: Reply[Any]) -> None:
        """Track ``reply`` until it is answered (failed if the actor stops first)."""
        pending = self.pending
        if pending is None:
            pending = self.pending = set()
        pending.add(weakref.ref(reply))
        if len(pending) >= self._prune_at:
            pending.difference_update([ref for ref in pending if ref() is None])
            self._prune_at = max(_PRUNE_AT, 2 * len(pending))

    def settled(self, reply: Reply[Any]) -> None:
        """``reply`` was answered: stop tracking it (the set goes with the last one)."""
        pending = self.pending
        if pending is not None:
            pending.discard(weakref.ref(reply))
            if not pending:
                self.pending = None

    def stop(self, reason: BaseException) -> None:
        self.stopped = reason
        for ref in list(self.pending or ()):
            reply = ref()
            if reply is not None:
                reply.fail(reason)


_PRUNE_AT = 64
"""Pending replies of one actor before dead references are looked for."""


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

    __slots__ = ("_actor", "closed", "link", "name", "published", "send_channel", "tracer")

    def __init__(
        self, name: str, send_channel: trio.MemorySendChannel[C], link: _Link, actor: Actor[C]
    ) -> None:
        self.name = name
        self.send_channel = send_channel
        self.link = link
        self._actor = actor
        self.tracer: InboxTracer | None = None  # told of sends through this address
        # What the actor publishes for its handles to read without a round trip (a
        # ``LatestReader``, see ``pitrio.actors.latest``), or None.
        self.published: Any = None
        self.closed = False  # its send side was closed (a read of ``published`` then fails too)

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

    def trace(self, tracer: InboxTracer | None) -> None:
        """Tell ``tracer`` of every command sent to this actor and taken by it (``None``: stop).

        For an actor that belongs to one traced session; a shared actor (the process's model
        router) is traced per caller with :meth:`traced_sends` instead.
        """
        self._address.tracer = tracer
        self._address._actor._tracer = tracer

    def traced_sends(self, tracer: InboxTracer) -> Address[C]:
        """A copy of this handle's address that tells ``tracer`` of the sends made through it
        (the actor's receives stay untraced: other callers share its inbox)."""
        address = self._address
        copy = Address(address.name, address.send_channel, address.link, address._actor)
        copy.tracer = tracer
        copy.published = address.published
        return copy

    async def tell(self, command: C) -> None:
        """Send a command that expects no answer; blocks while the inbox is full."""
        self._check_alive()
        channel = self._address.send_channel
        try:
            # ``send`` without its trailing task switch when the inbox has room: a cancelled
            # caller still sends nothing, but a round trip costs one scheduling step fewer
            # (issue 7: a turn makes about ten).
            await trio.lowlevel.checkpoint_if_cancelled()
            tracer = self._address.tracer
            if tracer is not None:  # before a full inbox may block the send: waits show
                tracer.on_send(self.name, command, channel.statistics().current_buffer_used)
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
        self._address.closed = True
        await self._address.send_channel.aclose()

    def _check_alive(self) -> None:
        stopped = self._address.link.stopped
        if stopped is not None:
            raise ActorStoppedError(f"actor {self.name} has stopped") from stopped
        if self._address.closed:
            raise ActorStoppedError(f"actor {self.name} has stopped")


class Actor(Generic[C]):
    """Base class: a bounded inbox, a nursery, and a loop calling :meth:`handle` per command."""

    # The base's own fields in slots: a subclass's instance dict then holds only the
    # subclass's fields, and an instance dict shares its keys with the class's other instances
    # (a few hundred bytes) only up to 30 of them. The session's actors have 33-37 in all, so
    # each had a 1.6 KB dict of its own, three per idle session in a daemon.
    __slots__ = (
        "_capacity",
        "_high_water",
        "_link",
        "_nursery",
        "_receive",
        "_received",
        "_send",
        "_tracer",
        "address",
        "name",
    )

    def __init__(self, *, name: str, capacity: int = 64) -> None:
        self.name = name
        self._capacity = capacity
        self._send, self._receive = trio.open_memory_channel[C](capacity)
        self._link = _Link()
        self._high_water = 0
        self._received = 0
        self._nursery: trio.Nursery | None = None
        self._tracer: InboxTracer | None = None  # told of receives (see Handle.trace)
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
        # Made when the actor stops, not while it runs (an exception and its text per idle
        # actor otherwise).
        stop_reason: BaseException | None = None
        _CURRENT_ACTOR.set(self.name)  # this task's own context: no reset needed
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.started()
                task_status.started(self.address)
                async with self._receive:
                    async for command in self._receive:
                        self._received += 1
                        queued = buffered(self._receive) + 1
                        self._high_water = max(self._high_water, queued)
                        tracer = self._tracer
                        if tracer is not None:
                            tracer.on_receive(self.name, command, queued - 1)
                        await self.handle(command)
                        if tracer is not None:
                            tracer.on_handled(self.name, command)
                await self.stopping()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            # The error inside a nursery's group, by type and message: no group text or repr
            # reaches a response (issue 21).
            leaf = unwrap_group(exc)
            stop_reason = ActorStoppedError(
                f"actor {self.name} failed: {type(leaf).__name__}: {leaf}".rstrip(": ")
            )
            stop_reason.__cause__ = exc
            raise
        finally:
            self._nursery = None
            if stop_reason is None:
                stop_reason = ActorStoppedError(f"actor {self.name} has stopped")
            self._link.stop(stop_reason)
            self.stopped()

    async def started(self) -> None:
        """Hook: runs inside the actor's nursery before the handle is handed out."""

    async def stopping(self) -> None:
        """Hook: runs when the inbox has closed, before the actor's own tasks are cancelled."""

    def stopped(self) -> None:
        """Hook: runs once the actor has stopped, however it stopped (must not await)."""

    async def handle(self, command: C) -> None:
        """Handle one command; subclasses implement this with ``match``."""
        raise NotImplementedError
