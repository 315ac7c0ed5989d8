"""Exactly-once commands at the transport: a command with an ``id`` is applied at most once.

:func:`apply_once` asks a session's :class:`~pitrio.sdk.session.CommandLedger` before applying
a command (see its module for the rule) and tells it the answer after. A repeat is answered with
the first answer plus ``"duplicate": true``, or, while the first is still being applied, with a
failure carrying ``"inProgress": true``; either way nothing is applied. With ``durable``, the
entries the command produces carry its id (the daemon: a repeat after a restart or on another
daemon is recognised from them, :func:`seed_ledger`).

Queries (``get_*``) and the settings of one connection (``set_event_format``) are always
applied: repeating them changes nothing, and a connection-local setting must reach the
connection that sent it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
import trio

from pitrio.sdk.session import (
    CommandLedger,
    CommandStamp,
    Fresh,
    InProgress,
    Repeat,
    SessionHandle,
    fingerprint,
    read_stamped_entries,
    stamping,
)
from pitrio.transports.rpc.protocol import Request, failure, success

if TYPE_CHECKING:  # the daemon's only: stdio RPC must not load the host (or psycopg)
    from pitrio.sdk.host import HostedSession

ALWAYS_APPLIED = frozenset({"set_event_format", "resume", "extension_ui_response"})
"""Commands a repeat applies again (besides every ``get_*``)."""


def ledger_key(request: Request) -> str | None:
    """The ledger's key for ``request``'s id (``None``: no id, or a command never deduplicated)."""
    if request.type.startswith("get_") or request.type in ALWAYS_APPLIED:
        return None
    key = request.id
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool) or not isinstance(key, int | float):
        return None  # no id (MISSING), or an id no client would mean as a key
    return orjson.dumps(key).decode()


async def apply_once(
    ledger: CommandLedger,
    request: Request,
    apply: Callable[[], Awaitable[dict[str, Any]]],
    *,
    durable: bool,
) -> dict[str, Any]:
    """``apply()``'s response, or the ledger's answer to a repeat (nothing applied)."""
    key = ledger_key(request)
    if key is None:
        return await apply()
    print_ = fingerprint(request.fields)
    decision = ledger.begin(key, print_)
    if isinstance(decision, Repeat):
        return {**decision.response, "id": request.id, "duplicate": True}
    if isinstance(decision, InProgress):
        return {**failure(request, f"Command {key} is still in progress"), "inProgress": True}
    assert isinstance(decision, Fresh)
    stamp = CommandStamp(key, request.type, print_) if durable else None
    response: dict[str, Any] | None = None
    try:
        # A durable command, once begun, is applied to its end even if the connection that
        # sent it goes (its task cancelled): the session carries it out regardless (a `bash`
        # runs and writes its record), and a cancelled apply would forget the id, so the
        # client's repeat on a new connection would apply it a second time (found by the
        # chaos run: a daemon paused past its client's patience, then resumed).
        with trio.CancelScope(shield=durable), stamping(stamp):
            response = await apply()
    finally:
        ledger.finish(key, print_, response)
    assert response is not None  # the scope has no deadline: it never ends the apply itself
    return response


def rebuilt_answer(stamp: CommandStamp, entry: dict[str, Any]) -> dict[str, Any]:
    """The answer to a command known only from ``entry``, which carries its stamp: a success;
    a prompt's disposition, which its entry implies (its message was recorded, so it ran); a
    ``bash`` command's result, which its record holds; no other ``data`` (not kept)."""
    request = Request(id=stamp.id, type=stamp.command, fields={})
    if stamp.command == "prompt":
        return success(request, {"disposition": "started"})
    message = entry.get("message")
    if stamp.command == "bash" and isinstance(message, dict):
        record = {key: message.get(key) for key in _BASH_DATA if key in message}
        return success(request, record)
    return success(request)


_BASH_DATA = ("output", "exitCode", "cancelled", "truncated", "fullOutputPath")
"""``bash``'s answer: its record's fields of the same names, in this order (``bash_data``)."""


async def hosted_ledger(hosted: HostedSession) -> CommandLedger:
    """The daemon's ledger of ``hosted``: made, and seeded from the session's entries, by the
    first command that needs it (a restarted daemon, or the daemon a session failed over to,
    recognises the ids written before)."""
    ledger = hosted.ledger
    if ledger is None:
        made = CommandLedger()
        await seed_ledger(made, await hosted.session())
        # Two first commands may both seed: the second's ledger loses, nothing else differs.
        ledger = hosted.ledger = hosted.ledger or made
    return ledger


async def seed_ledger(ledger: CommandLedger, session: SessionHandle) -> int:
    """Give ``ledger`` the ids the session's entries carry (the last it can hold); how many."""
    lines, _ = await session.invoke(lambda target: target.queries.entry_lines())
    stamped = read_stamped_entries(line for _, line in lines)
    for stamp, entry in stamped[-ledger.capacity :]:
        ledger.recorded(stamp.id, stamp.fingerprint, rebuilt_answer(stamp, entry))
    return len(stamped)
