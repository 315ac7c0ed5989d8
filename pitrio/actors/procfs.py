"""Linux's process table (``/proc``), read the one way the actors need it: a process's state
and its start time (what tells a reused pid apart), for session leases, the tool ledger and
tool process groups."""

from __future__ import annotations

from pathlib import Path

ENDED_STATES = (b"Z", b"X")
"""A zombie waiting for its reaper, a dead process: it has ended."""


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first, so field N
    of proc(5) is at index N - 3); ``None`` if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) is parenthesised and may hold spaces: split after it.
    return raw[raw.rfind(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (field 22: clock ticks since boot); ``None`` if it is
    gone or the field cannot be read."""
    fields = proc_stat(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def is_live(pid: int) -> bool:
    """Whether ``pid`` exists and has not ended (a zombie does not count)."""
    fields = proc_stat(pid)
    return fields is not None and len(fields) > 0 and fields[0] not in ENDED_STATES
