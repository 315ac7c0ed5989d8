"""A latest-value channel: an actor publishes an immutable snapshot, readers take the newest.

Some of an actor's state is read far more often than it changes: the tool executor's active
tools (read at every run and every prompt), the model router's stream functions (read at every
request). Asking for it costs a round trip through the inbox each time (two task switches;
issue 7: a plain turn made nine). With a :class:`Latest` the owner publishes a new immutable
value whenever the state changes, before it answers the command that changed it, and readers
take the newest value without a message (the ``watch`` channel of other actor runtimes).

What stays true: only the owner publishes, and values are immutable (tuples, frozen classes,
read-only mappings). A reader sees a change once the owner has handled the command that made
it; the handle methods that change published state are asks, so a caller that awaited one
sees the change in its next read, as a command it sent afterwards would have.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Latest(Generic[T]):
    """The owner's side: holds the newest published value."""

    __slots__ = ("_value",)

    def __init__(self, value: T) -> None:
        self._value = value

    def publish(self, value: T) -> None:
        """Make ``value`` (immutable) what readers see from now on."""
        self._value = value

    def get(self) -> T:
        """What was published last (for the owner, e.g. to skip publishing an equal value)."""
        return self._value

    def reader(self) -> LatestReader[T]:
        """A read-only view for the actor's handles."""
        return LatestReader(self)


class LatestReader(Generic[T]):
    """The readers' side: :meth:`get` returns the newest published value."""

    __slots__ = ("_source",)

    def __init__(self, source: Latest[T]) -> None:
        self._source = source

    def get(self) -> T:
        """The newest published value."""
        return self._source._value
