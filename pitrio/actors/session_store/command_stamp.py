"""A client command's id, written with the entries the command produced (exactly-once commands).

An entry appended while a :class:`CommandStamp` is current (:data:`COMMAND_STAMP`, a context
variable the session layer sets while it applies a command that carried an id) gets one more
top-level field, ``"pitrioCommand": {"id", "command", "fp"}``. pi 1.6.0's ``SessionManager``
parses each line with ``JSON.parse`` and keeps the object as it is, so the field is read and
ignored; pitrio's codec keeps it in the entry's ``extra``. Reading the stamps back
(:func:`read_stamps`) is how a restarted daemon, or another daemon after a failover, knows which
ids a session has already applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import attrs
import orjson

from pitrio.messages.entries import SessionEntry

STAMP_KEY = "pitrioCommand"
"""The entry field that carries the stamp (pitrio's own: pi has no such field)."""

_STAMP_BYTES = b'"' + STAMP_KEY.encode() + b'"'

E = TypeVar("E", bound=SessionEntry)


@attrs.frozen(slots=True)
class CommandStamp:
    """The client's id of the command being applied, its type and its fingerprint."""

    id: str
    command: str
    fingerprint: str

    def to_json(self) -> dict[str, str]:
        """The field's value as written."""
        return {"id": self.id, "command": self.command, "fp": self.fingerprint}

    @classmethod
    def from_json(cls, value: Any) -> CommandStamp | None:
        """The stamp a field holds; ``None`` for anything else (a field written by someone
        else is ignored, never an error)."""
        if not isinstance(value, dict):
            return None
        key, command, print_ = value.get("id"), value.get("command"), value.get("fp")
        if not (isinstance(key, str) and isinstance(command, str) and isinstance(print_, str)):
            return None
        return cls(key, command, print_)


COMMAND_STAMP: ContextVar[CommandStamp | None] = ContextVar("pitrio_command_stamp", default=None)
"""The command being applied in this task (and the tasks it started)."""


def current_stamp() -> CommandStamp | None:
    """The client command being applied in this task, if any."""
    return COMMAND_STAMP.get()


@contextmanager
def stamping(stamp: CommandStamp | None) -> Iterator[None]:
    """Make ``stamp`` current for the block (``None``: no stamp, also clearing an outer one)."""
    token = COMMAND_STAMP.set(stamp)
    try:
        yield
    finally:
        COMMAND_STAMP.reset(token)


def stamped(entry: E, stamp: CommandStamp) -> E:
    """``entry`` carrying ``stamp`` (a stamp it already carries is kept: the first command
    that produced an entry names it)."""
    extra = entry.extra or {}
    if STAMP_KEY in extra:
        return entry
    return attrs.evolve(entry, extra={**extra, STAMP_KEY: stamp.to_json()})


def read_stamps(lines: Iterable[bytes]) -> list[CommandStamp]:
    """The stamps ``lines`` carry, in file order, each id once (its first stamp)."""
    return [stamp for stamp, _ in read_stamped_entries(lines)]


def read_stamped_entries(lines: Iterable[bytes]) -> list[tuple[CommandStamp, dict[str, Any]]]:
    """Each stamp ``lines`` carry with the (first) entry carrying it, as JSON, in file order."""
    seen: set[str] = set()
    found: list[tuple[CommandStamp, dict[str, Any]]] = []
    for line in lines:
        if _STAMP_BYTES not in line:  # a byte search first: most lines carry none
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        stamp = CommandStamp.from_json(value.get(STAMP_KEY))
        if stamp is not None and stamp.id not in seen:
            seen.add(stamp.id)
            found.append((stamp, value))
    return found
