"""Exactly-once commands: which client command ids a session has taken, and their answers.

A client names a command with its ``id``; a client that lost its connection cannot know whether
the command happened, so it sends the same command with the same id again. :class:`CommandLedger`
decides, without I/O, what a command with an id is: new (apply it), a repeat of one still being
applied (answer "in progress"), or a repeat of one already answered (answer with that first
answer, change nothing). The transports hold one ledger per session and ask it before applying a
command; the session store seeds it from the ids its entries carry, so a repeat is recognised
after a restart or on another daemon too (``DESIGN-NOTES.md``, "Exactly-once commands").

The rule:

- A command is keyed by its ``id``; its *fingerprint* (:func:`fingerprint`: the command's
  fields without the ``id``) tells a repeat from a different command that reuses the id. A
  reused id with another fingerprint is a new command (pi 1.6.0 gives ids no meaning beyond
  matching a response, and scripts that send every command as ``"id": "1"`` must keep working).
- Only a successful answer is remembered: a refused command changed nothing, so applying its
  repeat is still "at most once".
- Memory is bounded: at most ``capacity`` answered ids are kept, the least recently used
  forgotten first; a session is seeded with the last ``capacity`` ids its entries carry. A
  repeat of an id older than that is applied again. Commands in progress are never evicted;
  their number is bounded by the transports' in-flight limits.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import attrs
import orjson

DEFAULT_CAPACITY = 256
"""Answered ids a ledger keeps (per session) before forgetting the least recently used."""


@attrs.frozen(slots=True)
class Fresh:
    """Apply the command (new, or a reused id with another fingerprint)."""


@attrs.frozen(slots=True)
class InProgress:
    """A repeat of a command still being applied: answer "in progress", apply nothing."""


@attrs.frozen(slots=True)
class Repeat:
    """A repeat of an answered command: answer with ``response``, apply nothing."""

    response: dict[str, Any]


Decision = Fresh | InProgress | Repeat


def fingerprint(fields: dict[str, Any]) -> str:
    """A short digest of a command's fields without its ``id`` (key order does not count)."""
    rest = {key: value for key, value in fields.items() if key != "id"}
    try:
        data = orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (never from a parsed frame): a fingerprint nothing matches
        data = repr(rest).encode("utf-8", "backslashreplace")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@attrs.define(slots=True)
class _Answered:
    fingerprint: str
    response: dict[str, Any]


class CommandLedger:
    """The ids one session has taken: in progress, or answered (bounded, LRU)."""

    __slots__ = ("_answered", "_capacity", "_running", "evicted")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a command ledger holds at least one answer")
        self._capacity = capacity
        self._running: dict[str, str] = {}
        self._answered: OrderedDict[str, _Answered] = OrderedDict()
        self.evicted = 0  # answered ids forgotten to stay within capacity

    @property
    def capacity(self) -> int:
        """The answered ids kept at most."""
        return self._capacity

    def __len__(self) -> int:
        return len(self._running) + len(self._answered)

    def begin(self, key: str, print_: str) -> Decision:
        """Decide what the command ``key`` with fingerprint ``print_`` is; a :class:`Fresh`
        command is in progress until :meth:`finish`."""
        answered = self._answered.get(key)
        if answered is not None and answered.fingerprint == print_:
            self._answered.move_to_end(key)
            return Repeat(answered.response)
        if self._running.get(key) == print_:
            return InProgress()
        # New, or the id reused by another command: that command is applied (and a later
        # repeat of it is then what the ledger answers).
        self._running[key] = print_
        return Fresh()

    def finish(self, key: str, print_: str, response: dict[str, Any] | None) -> None:
        """The command ``key`` was answered ``response`` (``None`` or unsuccessful: it
        changed nothing and is forgotten, so a repeat is applied)."""
        if self._running.get(key) == print_:
            del self._running[key]
        if response is None or response.get("success") is not True:
            return
        self._remember(key, _Answered(print_, response))

    def recorded(self, key: str, print_: str, response: dict[str, Any]) -> None:
        """Seed an answer known from a durable record (the session's entries)."""
        if key in self._running:
            return
        self._remember(key, _Answered(print_, response))

    def _remember(self, key: str, answered: _Answered) -> None:
        self._answered[key] = answered
        self._answered.move_to_end(key)
        while len(self._answered) > self._capacity:
            self._answered.popitem(last=False)
            self.evicted += 1
