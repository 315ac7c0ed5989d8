"""A run of streamed deltas carried as one item (issue 38, the stream ratio).

One read from a provider's stream often holds many chunks that each add text to the same
block (a 256 KB read of a fast stream holds thousands). Sent one by one, every delta cost
about four objects and a queue offer at each hop (provider, agent loop, session pump and
outlet, the RPC writer): no single step stood out. A :class:`DeltaRun` is those deltas as
one item: the texts, and what every delta's partial message shares (the header, the layout
of the blocks, where the streaming block's pieces stood at the first delta), so the partial
as of any delta is made in O(1) when a consumer asks for it.

The run is made only of what is already read: a lone delta is never held to wait for
company, and a run of one is just a delta (the builder makes a plain event then). It never
spans a change of block, of usage or of any other field of the message: every partial of
a run shares its header, so the ``usage`` written with each delta is the one at that delta.

A consumer that needs the deltas one by one expands the run (:meth:`DeltaRun.events`,
:meth:`DeltaRun.updates`): the same events, in the same order, each with its own partial,
as the builder would have made one delta at a time. Consumers that know runs (the agent
loop, the session pump and outlet, the RPC writer) carry it whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Literal, Protocol

import attrs

from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.events import MessageUpdate
from pitrio.messages.partial import Layout, PartialMessage, partial_message
from pitrio.messages.stream import AssistantMessageEvent, TextDelta, ThinkingDelta

RunKind = Literal["text_delta", "thinking_delta"]


@attrs.frozen
class DeltaRun:
    """Consecutive ``text_delta`` (or ``thinking_delta``) events of one block, read at once.

    The block at ``content_index`` is ``layout.streaming[slot]``; after the ``i``-th delta
    (from 0) it holds ``first_count + i`` pieces, every other streaming block the pieces
    ``counts`` gives it (they do not change during a run), and the content ``first_chars``
    plus the lengths of deltas 1..i characters of text. The pieces are append-only, so a
    partial made later is still the snapshot as of its delta.
    """

    kind: RunKind
    content_index: int
    deltas: tuple[str, ...]
    """The deltas' texts, in order (two or more)."""
    header: AssistantMessage
    """The fields every partial of the run shows (usage included)."""
    layout: Layout
    counts: tuple[int, ...]
    """Pieces of each streaming block at the run's start (``layout.counts()`` then)."""
    slot: int
    """The run's block's place among ``layout.streaming``."""
    first_count: int
    """Pieces of the streaming block as of the first delta (that delta included)."""
    first_chars: int
    """Text characters of the content as of the first delta."""
    last_chars: int
    """Text characters of the content as of the last delta."""

    def __len__(self) -> int:
        return len(self.deltas)

    def _counts(self, count: int) -> tuple[int, ...]:
        """Every streaming block's pieces when the run's block holds ``count``."""
        counts = list(self.counts)
        counts[self.slot] = count
        return tuple(counts)

    @property
    def last_partial(self) -> PartialMessage:
        """The message as of the last delta."""
        count = self.first_count + len(self.deltas) - 1
        counts = (count,) if len(self.counts) == 1 else self._counts(count)
        return partial_message(self.header, self.layout, counts, self.last_chars)

    def partials(self) -> Iterator[PartialMessage]:
        """The message as of each delta, in order."""
        header, layout = self.header, self.layout
        count, chars = self.first_count, self.first_chars - len(self.deltas[0])
        single = len(self.counts) == 1  # the usual case, without a list per delta
        for delta in self.deltas:
            chars += len(delta)
            counts = (count,) if single else self._counts(count)
            yield partial_message(header, layout, counts, chars)
            count += 1

    def events(self) -> list[TextDelta | ThinkingDelta]:
        """The stream events the run stands for, each with the partial as of it."""
        make = TextDelta if self.kind == "text_delta" else ThinkingDelta
        index = self.content_index
        return [
            make(content_index=index, delta=delta, partial=partial)
            for delta, partial in zip(self.deltas, self.partials(), strict=True)
        ]

    def updates(self) -> list[MessageUpdate]:
        """The ``message_update`` events the agent loop emits for the run, one per delta."""
        return [
            MessageUpdate(assistant_message_event=event, message=event.partial)
            for event in self.events()
        ]

    def merged_update(self) -> MessageUpdate:
        """One update standing for the whole run, as a subscriber's buffer merges deltas of
        a client that is behind: the deltas joined, the last partial."""
        partial = self.last_partial
        make = TextDelta if self.kind == "text_delta" else ThinkingDelta
        event = make(content_index=self.content_index, delta="".join(self.deltas), partial=partial)
        return MessageUpdate(assistant_message_event=event, message=partial)


StreamItem = AssistantMessageEvent | DeltaRun
"""What a provider may hand a sender that takes runs (see ``EventSender``)."""

UpdateItem = MessageUpdate | DeltaRun
"""A streamed update as the agent loop and the session pump carry it."""


class RunSender(Protocol):
    """An ``EventSender`` that takes runs whole: one whose ``takes_runs`` is true (the agent
    loop's intake). A provider hands any other sender the runs expanded."""

    takes_runs: bool

    async def send(self, value: StreamItem, /) -> None:
        """Send one event or run, waiting while the receiver is behind."""

    def send_nowait(self, value: StreamItem, /) -> None:
        """Send one event or run at once (``trio.WouldBlock`` when the receiver is full)."""


def takes_runs(sender: object) -> bool:
    """Whether ``sender`` takes :class:`DeltaRun` items whole (see :class:`RunSender`)."""
    return getattr(sender, "takes_runs", False) is True


def expand_events(items: Iterable[StreamItem]) -> list[AssistantMessageEvent]:
    """``items`` with every run expanded into its events."""
    out: list[AssistantMessageEvent] = []
    for item in items:
        if isinstance(item, DeltaRun):
            out += item.events()
        else:
            out.append(item)
    return out


def expand_updates(items: Iterable[UpdateItem]) -> list[MessageUpdate]:
    """``items`` with every run expanded into its updates."""
    out: list[MessageUpdate] = []
    for item in items:
        if isinstance(item, DeltaRun):
            out += item.updates()
        else:
            out.append(item)
    return out


def update_count(items: Iterable[UpdateItem]) -> int:
    """How many updates ``items`` stand for (a run counts its deltas)."""
    return sum(len(item.deltas) if type(item) is DeltaRun else 1 for item in items)


def last_message(item: UpdateItem) -> AgentMessage:
    """The message as of the last update ``item`` stands for."""
    if isinstance(item, DeltaRun):
        return item.last_partial
    return item.message


__all__ = [
    "DeltaRun",
    "RunKind",
    "RunSender",
    "StreamItem",
    "UpdateItem",
    "expand_events",
    "expand_updates",
    "last_message",
    "takes_runs",
    "update_count",
]
