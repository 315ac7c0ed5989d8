"""The launcher's parsing child (issue 38; :mod:`pitrio._preparse` says why and how it is
started and taken): read a session file in blocks and, for each block, write to the memory
file what the parser's quick path needs of each line and the block's bytes.

Only the child imports this module (its program is ``_preparse._CHILD``), so the launcher's
process does not load this code before the runtime's imports. Only the standard library and
orjson are imported, the memory file's format from :mod:`pitrio._preparse`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from array import array
from typing import Any

from pitrio._preparse import BLOCK, HEADER, LENGTH, MAGIC, MESSAGE_KEY, PAGE, identity


def check_line(value: Any) -> tuple[str, str | None, str] | None:
    """A parsed line's ``(id, parentId, role)`` if it has the shape the session parser
    builds at once (``SessionParser._feed_terminated``'s quick path for pi's message line:
    ``type``, ``id``, ``parentId``, ``timestamp`` and, last, ``message``); else ``None``.
    The parser checks what depends on other lines (a duplicate id, the parent) itself."""
    if value.__class__ is not dict or len(value) != 5 or next(reversed(value)) != "message":
        return None
    entry_id = value.get("id")
    parent_id = value.get("parentId", False)
    message = value.get("message")
    if (
        value.get("type") == "message"
        and entry_id.__class__ is str
        and entry_id
        and (parent_id is None or parent_id.__class__ is str)
        and value.get("timestamp").__class__ is str
        and message.__class__ is dict
    ):
        role = message.get("role")
        if role.__class__ is str:
            return entry_id, parent_id, role
    return None


def write_records(
    source: int, memory: int, parent: int | None = None, block_size: int = BLOCK
) -> bool:
    """Read the file open at ``source`` to its end and write its blocks of lines to
    ``memory``: for each, a record of what :func:`check_line` found in each line (``None``
    where it found nothing) and where its lines and messages lie (:class:`MappedLines`), then
    the block's bytes from the next page on, then the header (see :class:`Offer`); whether
    the file was read whole and unchanged, ``block_size`` bytes a read. ``parent``: stop
    when the process's parent is no longer that one."""
    import marshal
    from itertools import accumulate

    import orjson

    loads, refused, check = orjson.loads, orjson.JSONDecodeError, check_line
    key, skip, newline = MESSAGE_KEY, len(MESSAGE_KEY) - 1, (1).__add__
    before = os.fstat(source)
    if not stat.S_ISREG(before.st_mode):
        return False
    found_at = identity(before)
    at = HEADER.size
    rest: list[bytes] = []
    read = covered = 0
    while True:
        if parent is not None and os.getppid() != parent:
            return False
        block = os.read(source, block_size)
        if not block:
            break
        read += len(block)
        cut = block.rfind(b"\n") + 1
        if not cut:
            rest.append(block)
            continue
        last = block[cut:]
        data = b"".join([*rest, block[:cut]]) if rest else block[:cut]
        rest = [last] if last else []
        lines = data.split(b"\n")
        lines.pop()  # after the last newline: nothing
        bounds = array("Q", accumulate(map(newline, map(len, lines)), initial=0))
        starts = array("Q", [0])
        ids: list[Any] = []
        parents: list[Any] = []
        roles: list[Any] = []
        # One object for each id and each role in the block: marshal writes the repeats (a
        # parentId naming a line before, the same role again) as references, and the parent
        # loads one string for them, not one for each line.
        named: dict[str, str] = {}
        kinds: dict[str, str] = {}
        for raw, offset in zip(lines, bounds, strict=False):  # bounds: one more, the end
            try:
                found = check(loads(raw))
            except refused:
                found = None
            if found is None:
                ids.append(None)
                parents.append(None)
                roles.append(None)
                starts.append(0)
                continue
            entry_id, parent_id, role = found
            ids.append(entry_id)
            parents.append(parent_id if parent_id is None else named.get(parent_id, parent_id))
            roles.append(kinds.setdefault(role, role))
            named[entry_id] = entry_id
            message = raw.find(key)
            starts.append(offset + message + skip if message >= 0 and raw[-1:] == b"}" else 0)
        record = (len(data), ids, parents, roles, bounds.tobytes(), starts.tobytes())
        at = _record(memory, at, marshal.dumps(record))
        at = _write_all(memory, data, -(-at // PAGE) * PAGE)
        covered = read - len(last)
        _write_all(memory, HEADER.pack(MAGIC, *found_at, at, covered, False), 0)
    if read != before.st_size or identity(os.fstat(source)) != found_at:
        return False  # changed while read: the taker's identity check refuses it anyway
    at = _record(memory, at, marshal.dumps(b"".join(rest)))
    _write_all(memory, HEADER.pack(MAGIC, *found_at, at, read, True), 0)
    return True


def _record(memory: int, at: int, data: bytes) -> int:
    return _write_all(memory, LENGTH.pack(len(data)) + data, at)


def _write_all(memory: int, data: bytes, at: int) -> int:
    view = memoryview(data)
    while view:
        written = os.pwrite(memory, view, at)
        view = view[written:]
        at += written
    return at


def _child(path: str, memory: int, parent: int, block: int = BLOCK) -> None:
    """The child's whole life: parse, write, exit (never to the caller's code)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the parent's
        # Where no core is free, the parent and the child share one: at a lower priority the
        # child takes what the parent leaves rather than half of it (on an idle core, it runs
        # as fast either way). Measured: nothing (the benchmarks run everything at 19).
        with contextlib.suppress(OSError):
            os.nice(10)
        # The protocol's pipes and the terminal are the parent's: a reader waiting for the
        # parent's EOF must not wait for this process too (spawned, they are /dev/null
        # already; a caller that forked may not have seen to it).
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        source = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        if write_records(source, memory, parent, block):
            code = 0
    except BaseException:
        code = 1
    finally:
        os._exit(code)  # no atexit handler, no buffer of the parent's flushed twice
