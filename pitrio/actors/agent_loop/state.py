"""The agent's state as its handles see it: the :class:`AgentState` snapshot and the lazy
transcript view a resumed session's snapshot holds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import attrs
import trio

from pitrio.actors.agent_loop.hooks import LoopOptions
from pitrio.actors.session_store.storage import gc_paused
from pitrio.messages.agent import AgentMessage, SystemMessage, ThinkingLevel
from pitrio.messages.codec import to_json
from pitrio.messages.model import Model
from pitrio.messages.snapshot import FrozenView, Snapshot
from pitrio.messages.transcript import system_messages_from


@attrs.frozen(kw_only=True)
class AgentState:
    """A snapshot of the agent's state (spec §2.1)."""

    system_prompt: str
    model: Model
    thinking_level: ThinkingLevel
    tools: tuple[str, ...]
    _messages: Sequence[AgentMessage] = attrs.field(
        alias="messages", eq=attrs.cmp_using(eq=lambda a, b: tuple(a) == tuple(b))
    )
    """The transcript; a resumed session's is a lazy view until :attr:`messages` is read."""
    is_streaming: bool
    streaming_message: AgentMessage | None
    pending_tool_calls: frozenset[str]
    error_message: str | None
    steering: tuple[AgentMessage, ...]
    follow_up: tuple[AgentMessage, ...]
    options: LoopOptions
    runs: int = 0
    """How many runs this agent has started (the number of the latest one)."""

    @property
    def messages(self) -> Sequence[AgentMessage]:
        """The transcript, an immutable sequence (a tuple, or a :class:`Snapshot` sharing the
        previous state's messages: issue 38). Read from a resumed session's file, it is
        decoded here, on first access: opening a long session and answering ``get_state``
        need not decode 48,000 messages (issue 7, resume)."""
        messages = self._messages
        if not isinstance(messages, tuple | Snapshot):
            with gc_paused(lasting=True):  # tens of thousands of acyclic objects
                messages = tuple(messages)
            object.__setattr__(self, "_messages", messages)  # a cache of the same value
        return messages

    @property
    def messages_view(self) -> Sequence[AgentMessage]:
        """The transcript as held, never decoded here: a lazy view (a
        :class:`~pitrio.messages.snapshot.FrozenView`) while a resumed one is not decoded,
        else as :attr:`messages`. Immutable either way; for readers that ask the view for
        what they need (its system messages: issue 38) rather than every message."""
        return self._messages

    @property
    def message_count(self) -> int:
        """``len(messages)`` without decoding anything."""
        return len(self._messages)

    def messages_json(self) -> JsonTranscript:
        """The transcript as plain JSON values, for ``get_messages``: messages a resumed
        session never decoded come straight from their stored lines (issue 38), the others
        are encoded from their typed form."""
        return JsonTranscript(self._messages)

    async def load_messages(self, slice_size: int = 2000) -> Sequence[AgentMessage]:
        """:attr:`messages`, decoding a lazy transcript in slices with a checkpoint between
        them, so other tasks (a ``get_state`` sent with a ``get_messages``) are not held up
        for the whole decode."""
        messages = self._messages
        if isinstance(messages, tuple | Snapshot):
            return messages
        decoded: list[AgentMessage] = []
        total = len(messages)
        for start in range(0, total, slice_size):
            with gc_paused(lasting=True):
                decoded.extend(messages[i] for i in range(start, min(start + slice_size, total)))
            await trio.lowlevel.checkpoint()
        result = tuple(decoded)
        object.__setattr__(self, "_messages", result)
        return result


class TranscriptView(FrozenView[AgentMessage]):
    """A lazily decoded transcript followed by messages added since (an immutable view)."""

    __slots__ = ("_base", "_tail")

    def __init__(self, base: Sequence[AgentMessage], tail: Sequence[AgentMessage]) -> None:
        self._base = base
        self._tail = tail

    def __len__(self) -> int:
        return len(self._base) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[AgentMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> AgentMessage | tuple[AgentMessage, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return tuple(self)[index]
            # Each part sliced on its own: only the base's items asked for are decoded.
            base = len(self._base)
            head = tuple(self._base[start:stop]) if start < base else ()
            return head + tuple(self._tail[max(start - base, 0) : max(stop - base, 0)])
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        base = len(self._base)
        return self._base[index] if index < base else self._tail[index - base]

    def __iter__(self) -> Iterator[AgentMessage]:
        yield from self._base
        yield from self._tail

    def system_messages(self, start: int = 0) -> list[SystemMessage]:
        """The system messages from ``start`` on, the base's found without decoding the
        others (see :func:`pitrio.messages.transcript.system_messages_from`)."""
        size = len(self._base)
        found = system_messages_from(self._base, start) if start < size else []
        found.extend(m for m in self._tail[max(start - size, 0) :] if isinstance(m, SystemMessage))
        return found

    def starts_with(self, previous: object) -> bool:
        """Whether this view starts with ``previous``'s items because both are views of the
        same base and ``previous``'s added messages begin this one's (``False`` says
        nothing). Compared without decoding the base."""
        if not isinstance(previous, TranscriptView) or previous._base is not self._base:
            return False
        tail = self._tail
        if isinstance(tail, Snapshot) and tail.starts_with(previous._tail):
            return True  # the agent's states: each one's added messages extend the last's
        count = len(previous._tail)
        return count <= len(self._tail) and all(
            a is b for a, b in zip(previous._tail, self._tail[:count], strict=True)
        )

    @property
    def base(self) -> Sequence[AgentMessage]:
        """The lazily decoded part (a resumed session's stored messages)."""
        return self._base

    @property
    def tail(self) -> Sequence[AgentMessage]:
        """The messages added since the base was read (immutable)."""
        return self._tail


class JsonTranscript(Sequence[Any]):
    """A transcript's messages as plain JSON values, each built when read (see
    :meth:`AgentState.messages_json`); a stored message may come as ``bytes``, its JSON
    text as the session file holds it."""

    __slots__ = ("_base", "_tail")

    def __init__(self, messages: Sequence[AgentMessage]) -> None:
        # A lazy view's stored part answers from its lines; a decoded tuple has none.
        if isinstance(messages, TranscriptView):
            self._base, self._tail = messages.base, messages.tail
        else:
            self._base, self._tail = messages, ()

    def __len__(self) -> int:
        return len(self._base) + len(self._tail)

    def _value(self, index: int) -> Any:
        base = self._base
        size = len(base)
        if index >= size:
            return to_json(self._tail[index - size])
        json_value = getattr(base, "json_value", None)
        return to_json(base[index]) if json_value is None else json_value(index)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            json_values = getattr(self._base, "json_values", None)
            if step != 1 or json_values is None:
                return [self._value(i) for i in range(start, stop, step)]
            # A run of stored messages in one call (get_messages takes 256 at a time): one
            # loop there, not a lookup and two calls per message (issue 38).
            split = max(start, min(stop, len(self._base)))
            values: list[Any] = json_values(start, split) if start < split else []
            values.extend(self._value(i) for i in range(split, stop))
            return values
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        return self._value(index)
