"""The launcher's parsing child (issue 38; :mod:`pitrio._preparse` says why and how it is
started and taken): read a session file in blocks and, for each block, write to the memory
file what the parser's quick path needs of each line and the block's bytes.

Once its records are written it waits for one request, the Chat Completions or Anthropic
Messages prefix of the resumed transcript, and answers it (:func:`serve`;
:mod:`pitrio._preparse_prefix` is the parent's side).

Only the child imports this module (its program is ``_preparse._CHILD``), so the launcher's
process does not load this code before the runtime's imports. Only the standard library and
orjson are imported, the memory file's format from :mod:`pitrio._preparse`, and for a request
:mod:`pitrio._prefix_chat` or :mod:`pitrio._prefix_anthropic` (standard library and orjson
too).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from pitrio._preparse import (
    ANSWER,
    BLOCK,
    HEADER,
    LENGTH,
    MAGIC,
    MESSAGE_KEY,
    PAGE,
    REQUEST,
    identity,
    write_all,
)


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


Block = tuple[int, int, Any, Any]
"""A block of lines as the child wrote it: the file's line number before its first line,
where its bytes start in the memory file, and its lines' and messages' offsets in it (the
``bounds`` and ``starts`` arrays of :class:`~pitrio._preparse.MappedLines`)."""


def write_records(
    source: int,
    memory: int,
    parent: int | None = None,
    block_size: int = BLOCK,
    blocks: list[Block] | None = None,
) -> bool:
    """Read the file open at ``source`` to its end and write its blocks of lines to
    ``memory``: for each, a record of what :func:`check_line` found in each line (``None``
    where it found nothing) and where its lines and messages lie (:class:`MappedLines`), then
    the block's bytes from the next page on, then the header (see :class:`Offer`); whether
    the file was read whole and unchanged, ``block_size`` bytes a read. ``parent``: stop
    when the process's parent is no longer that one. ``blocks``, if given, gets each block
    written (:data:`Block`), for a prefix request to find its lines' messages. ``source`` is
    closed once read, whatever the outcome."""
    import marshal
    from itertools import accumulate

    import orjson

    loads, refused, check = orjson.loads, orjson.JSONDecodeError, check_line
    key, skip, newline = MESSAGE_KEY, len(MESSAGE_KEY) - 1, (1).__add__
    try:
        before = os.fstat(source)
        if not stat.S_ISREG(before.st_mode):
            return False
        found_at = identity(before)
        at = HEADER.size
        rest: list[bytes] = []
        read = covered = lines_before = 0
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
            base = -(-at // PAGE) * PAGE
            if blocks is not None:
                blocks.append((lines_before, base, bounds, starts))
            lines_before += len(lines)
            at = write_all(memory, data, base)
            covered = read - len(last)
            write_all(memory, HEADER.pack(MAGIC, *found_at, at, covered, False), 0)
        if read != before.st_size or identity(os.fstat(source)) != found_at:
            return False  # changed while read: the taker's identity check refuses it anyway
    finally:
        # Closed before the header says the records are finished: a taker that sees them
        # finished sees a child holding only its memory file and its pipes.
        os.close(source)
    at = _record(memory, at, marshal.dumps(b"".join(rest)))
    write_all(memory, HEADER.pack(MAGIC, *found_at, at, read, True), 0)
    return True


def _record(memory: int, at: int, data: bytes) -> int:
    return write_all(memory, LENGTH.pack(len(data)) + data, at)


def _child(
    path: str, memory: int, parent: int, block: int = BLOCK, requests: int = -1, answers: int = -1
) -> None:
    """The child's whole life: parse, write, then (given a request channel) wait for a
    prefix request and answer it (:func:`serve`), exit (never to the caller's code)."""
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
        # Nor any other descriptor this process was given (whatever the parent held
        # inheritable when it spawned it): it may outlive its parent by a moment, waiting.
        at = 3
        for kept in sorted(fd for fd in (memory, requests, answers) if fd >= 3):
            os.closerange(at, kept)
            at = kept + 1
        os.closerange(at, os.sysconf("SC_OPEN_MAX"))
        source = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        blocks: list[Block] = []
        # write_records closes the file once read: it is not held open while the child waits.
        if write_records(source, memory, parent, block, blocks if requests >= 0 else None):
            code = 0
            if requests >= 0:
                serve(requests, answers, memory, blocks, parent)
    except BaseException:
        code = 1
    finally:
        os._exit(code)  # no atexit handler, no buffer of the parent's flushed twice


# --- the prefix request (:mod:`pitrio._preparse_prefix` is the parent's side) ---------------

WAIT = 10.0
"""Seconds between looks at the parent while waiting for a request (its death closes the
request pipe, which ends the wait at once; the look is for a pipe some other process holds)."""


def serve(requests: int, answers: int, memory: int, blocks: list[Block], parent: int) -> None:
    """Wait for one request on ``requests`` and answer it on ``answers``; return at once when
    the pipe ends (the parent closed it or exited), or the parent changed.

    The request, in ``memory`` where the pipe's :data:`~pitrio._preparse.REQUEST` says, is
    ``marshal``'s ``(facts, lines, inline, idle, kind)``: the facts as a tuple (a
    :class:`~pitrio._prefix_chat.ChatFacts` for ``kind`` ``"chat"``, an
    :class:`~pitrio._prefix_anthropic.AnthropicFacts` for ``"anthropic"``), the file's line
    numbers (``array("Q")``'s bytes) of the transcript's messages in order, the built
    messages' texts by position, and whether to work under ``SCHED_IDLE``. The answer,
    written after the request (from the next page on), is :func:`prefix_answer`'s; then its
    place goes down ``answers`` (length 0: no prefix)."""
    import select

    while True:
        if os.getppid() != parent:
            return
        if select.select([requests], [], [], WAIT)[0]:
            break
    message = os.read(requests, REQUEST.size)
    if len(message) != REQUEST.size:
        return  # the end of the pipe: no request will come
    import gc
    import marshal

    gc.disable()  # an object graph of a few lists, built once: nothing to collect
    offset, length = REQUEST.unpack(message)
    request = os.pread(memory, length, offset)
    facts, numbers, inline, idle, kind = marshal.loads(request)
    if idle:
        # Only on a core nothing else wants: the request comes as the parent starts
        # answering, and what reads the answers then (the parent, a client reading 16 MB
        # of get_messages) must not share a core with this work, which is needed only
        # later. The parent bounds its wait for it (it may be starved on a busy machine).
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    lines = array("Q")
    lines.frombytes(numbers)
    pieces = prefix_answer(memory, blocks, tuple(facts), lines, inline, kind)
    at = -(-(offset + length) // PAGE) * PAGE
    size = sum(map(len, pieces))
    _write_vector(memory, pieces, at)
    os.write(answers, ANSWER.pack(at, size))


def messages_of(
    memory: int, blocks: list[Block], lines: Any, inline: Any = None
) -> Iterator[memoryview | bytes]:
    """The message JSON texts of the given line numbers (each as ``MappedLines.message`` cuts
    it), ending at the first line that has none: not a line of a block (the header is one,
    but not certified), or a line whose message was not found. Where a line number is 0, the
    text is ``inline``'s for that position (a message the parent built, such as a
    compaction's summary), the end if it has none.

    Each block is read from ``memory`` into one buffer, used again for the next (each text a
    view of it, valid until the next is asked for: the converter is done with it by then),
    rather than mapped: the records' pages then count in the parent's resident memory only,
    not in this process's too (measured: 23 MB of 48 for 48,000 messages)."""
    firsts = [block[0] for block in blocks]
    low = high = 0
    bounds: Any = ()
    starts: Any = ()
    buffer = bytearray(BLOCK + (BLOCK >> 2))
    view = memoryview(buffer)
    given = inline or {}
    for position, number in enumerate(lines):
        if not number:
            text = given.get(position)
            if text is None:
                return
            yield text
            continue
        if not low < number <= high:
            found = bisect_right(firsts, number - 1) - 1
            if found < 0:
                return
            low, base, bounds, starts = blocks[found]
            high = low + len(bounds) - 1
            if not low < number <= high:
                return
            size = bounds[-1]
            if size > len(buffer):
                buffer = bytearray(size)  # a new one: the last text's view may still be held
                view = memoryview(buffer)
            if os.preadv(memory, [view[:size]], base) != size:
                return
        index = number - low
        start = starts[index]
        if not start:
            return
        yield view[start : bounds[index] - 2]


def prefix_answer(
    memory: int,
    blocks: list[Block],
    facts: tuple[Any, ...],
    lines: Any,
    inline: Any = None,
    kind: str = "chat",
) -> list[Any]:
    """The answer to a request: ``[]`` where no prefix was made, else the length of a
    ``marshal`` header (:data:`~pitrio._preparse.LENGTH`), the header, and the segments
    themselves (written as they are: ~8 MB for 48,000 messages, not copied into one). The
    header: ``(facts, consumed, segment lengths, tail, items, last_role, pending, images)``
    for ``kind`` ``"chat"``; ``(facts, consumed, segment lengths, tail, items, open turns,
    newest user turn, pending)`` for ``"anthropic"`` (the open turns are JSON values, which
    ``marshal`` keeps as they are, dict order included)."""
    import marshal

    if not blocks or kind not in ("chat", "anthropic"):
        return []
    texts = messages_of(memory, blocks, lines, inline)
    if kind == "anthropic":
        from pitrio._prefix_anthropic import AnthropicFacts, prepare_anthropic_prefix

        turns = prepare_anthropic_prefix(texts, AnthropicFacts(*facts))
        if turns is None:
            return []
        header = marshal.dumps(
            (
                tuple(turns.facts),
                turns.consumed,
                [len(segment) for segment in turns.segments],
                turns.tail,
                turns.items,
                turns.turns,
                turns.newest_user,
                turns.pending,
            )
        )
        return [LENGTH.pack(len(header)), header, *turns.segments]
    from pitrio._prefix_chat import ChatFacts, prepare_chat_prefix

    prefix = prepare_chat_prefix(texts, ChatFacts(*facts))
    if prefix is None:
        return []
    header = marshal.dumps(
        (
            tuple(prefix.facts),
            prefix.consumed,
            [len(segment) for segment in prefix.segments],
            prefix.tail,
            prefix.items,
            prefix.last_role,
            prefix.pending,
            prefix.images,
        )
    )
    return [LENGTH.pack(len(header)), header, *prefix.segments]


def _write_vector(memory: int, pieces: list[Any], at: int) -> None:
    # ``pwritev`` takes at most IOV_MAX (1024) buffers a call, and may write fewer bytes.
    views = [memoryview(piece) for piece in pieces if piece]
    first = 0
    while first < len(views):
        written = os.pwritev(memory, views[first : first + 1024], at)
        at += written
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]
