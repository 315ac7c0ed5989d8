"""A session file parsed on the machine's second core while the process imports (issue 38).

Why: ``pitrio --mode rpc --session FILE`` spends ~0.2 s importing pitrio on one core while
the other idles, then ~0.14 s reading a 20,000-turn file (48,000 lines): orjson parsing every
line to check its envelope is most of it. Started before those imports, a child process reads
and parses the file meanwhile and hands over, per block of lines, what the parser's usual
line needs from its JSON (id, parentId, role) and where each line and its message lie, in
``marshal``'s form, then the block's bytes themselves, through a memory file. The parent maps
those bytes (:class:`MappedLines`) rather than copying them into 48,000 objects of its own
(fresh pages: most of what taking them cost), and builds the entries without parsing a line
(DESIGN-NOTES, "Issue 38, resume on the second core"). Only where a core is free
(:func:`idle_core`): elsewhere the child's CPU would be the parent's.

The child decides nothing: it certifies lines whose JSON has the shape of the parser's quick
path (``check_line`` is that path's JSON condition, written once more where pitrio cannot be
imported). Every other line, and every check that depends on earlier lines (a
duplicate id, a parent read before), is the parser's, in the parent. So the result is the
in-process parse's, problems included.

What is offered is taken by a read of the same file (device, inode, size, modification and
change times as the child read them): a cache of a pure function of the file's bytes, so any
reader of that file may take it, and a file changed meanwhile is read again in-process. The
reader never waits for the child: it takes the blocks handed over so far and reads the rest
itself (:class:`Offer`). Any failure (no ``posix_spawn`` or ``memfd_create``, a child that
failed or was killed) leaves the in-process read.

A child that finished is not reaped when its records are taken: it waits for one request, the
Chat Completions prefix of the resumed transcript (:mod:`pitrio._preparse_prefix`, which says
who reaps it then). Otherwise the child is reaped by whoever takes the offer (a child caught
up with is killed) or by :func:`discard`; it ends with the parent (it checks its parent
between blocks, and its request channel ends with the parent's descriptors).

Only the standard library is imported here: this module runs before the runtime is imported
(``pitrio/__init__.py`` loads nothing until an SDK name is used). This is the parent's side
(which file, whether a core is free, the spawn, taking the records) and the memory file's
format; the child's own code (``check_line``, ``write_records``, ``_child``) is
:mod:`pitrio._preparse_child`, which this process never imports: only the child loads it (and
orjson).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import struct
import sys
from array import array
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pitrio._preparse_guess import named_session

if TYPE_CHECKING:
    import threading

BLOCK = 1 << 20
"""The child's read size, and so the size of the blocks of lines handed over."""

HEADER = struct.Struct("<8s3Q2qQQ?")
"""At the memory file's start, written again after each record: a magic, the file's device,
inode, size, modification and change times (ns) as the child found them when it began, where
the records end, how much of the file they cover, and whether the child finished."""
MAGIC = b"pitrio2\n"
LENGTH = struct.Struct("<Q")
PAGE = mmap.ALLOCATIONGRANULARITY
"""A block's bytes start at a multiple of this in the memory file: where a mapping may."""
MESSAGE_KEY = b'"message":{'
"""Where the message of pi's usual line begins (``TailMessageEntry.message_bytes``'s key)."""
REQUEST = struct.Struct("<QQ")
"""A prefix request on the request pipe: where in the memory file it lies, and its length."""
ANSWER = struct.Struct("<QQ")
"""An answer on the answer pipe: where in the memory file it lies, and its length (0: no
prefix)."""

Identity = tuple[int, int, int, int, int]


class MappedLines:
    """A block of whole lines as the child read them (newlines included), mapped read-only
    from the memory file, and where each line and its message lie in it. Line ``index``
    counts from 1: its bytes (without the newline) are ``data[bounds[index - 1] :
    bounds[index] - 1]``; its message's JSON text, where the child found pi's usual line
    (``"message":{`` found, ``}`` last), starts at ``starts[index]`` (0 where it did not) and
    ends before the line's closing brace. :attr:`first` is the file's line number before the
    block's first line, set by the parser that takes it."""

    __slots__ = ("bounds", "data", "first", "starts", "view")

    def __init__(self, data: mmap.mmap | bytes, bounds: array[int], starts: array[int]) -> None:
        self.data = data
        self.view = memoryview(data)
        """:attr:`data` for reading without a copy (the mapping is never closed)."""
        self.bounds = bounds
        self.starts = starts
        self.first = 0

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def raw(self, index: int) -> bytes:
        """Line ``index``'s bytes, without its newline."""
        bounds = self.bounds
        return self.data[bounds[index - 1] : bounds[index] - 1]

    def message(self, index: int) -> bytes | None:
        """Line ``index``'s message as the JSON text the line holds, or ``None`` where the
        child did not find it (then it is parsed out of :meth:`raw`)."""
        start = self.starts[index]
        return self.data[start : self.bounds[index] - 2] if start else None


Chunk = tuple[MappedLines, list[Any], list[Any], list[Any]]


def write_all(memory: int, data: bytes, at: int) -> int:
    """Write all of ``data`` into the memory file at ``at`` (``pwrite`` may write less);
    where it ends. The child's records and answer, the parent's request."""
    view = memoryview(data)
    while view:
        written = os.pwrite(memory, view, at)
        view = view[written:]
        at += written
    return at


def identity(status: os.stat_result) -> Identity:
    """What tells a file's bytes unchanged: device, inode, size, modification and change
    times (a write changes the change time; ``utime`` cannot set it back)."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


class Offer:
    """A child parsing one file, and the memory file where it leaves what it found.

    The child writes records one after the other and, after each, the header saying how far
    they go and how much of the file they cover; the taker reads what is there while the
    child goes on, and never waits for it: once it has caught up with an unfinished child it
    kills it and reads the rest of the file itself (a child starved of CPU on a busy
    machine, or stopped, costs no more than the blocks it had not handed over)."""

    def __init__(self, pid: int, memory: int, requests: int = -1, answers: int = -1) -> None:
        self.pid = pid
        self.memory = memory
        self.requests = requests
        """The write end of the child's request pipe (-1: none; the child exits once its
        records are written): see :mod:`pitrio._preparse_prefix`."""
        self.answers = answers
        """The read end of the pipe the child answers a request on (-1: none)."""
        self.covered = 0
        """How much of the file the records taken cover: lines whole, up to a newline (the
        file's size if the child finished, its last line without a newline included)."""
        self.end = 0
        """Where the records end in the memory file (once all were taken)."""
        self.read: Identity = (0, 0, 0, 0, 0)
        """The identity of the file the records are of (once taken)."""
        self.reaper: threading.Thread | None = None
        """The thread that waits to reap a child that had not yet exited when stopped."""
        self._stopped = False

    def stop(self, then: Callable[[], None] | None = None) -> None:
        """Kill the child if it still runs, and reap it (once) without waiting for it: a
        killed process exits only once the scheduler runs it, which on a loaded machine (and
        at the child's priority) took hundreds of milliseconds. If it has not exited yet, a
        daemon thread waits for it instead. ``then`` runs once the child is reaped (here or
        in that thread): what must not happen while the child could still write."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
        try:
            exited, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            exited = self.pid
        if exited:
            if then is not None:
                then()
            return
        import threading

        self.reaper = threading.Thread(
            target=_reap, args=(self.pid, then), name="pitrio-preparse-reaper", daemon=True
        )
        self.reaper.start()

    def close(self) -> None:
        """:meth:`stop`, and close the memory file and the request channel (idempotent)."""
        self.stop()
        for fd in (self.memory, self.requests, self.answers):
            if fd >= 0:
                os.close(fd)
        self.memory = self.requests = self.answers = -1

    def alive(self) -> bool:
        """Whether the child runs (not stopped, not exited; one that exited is reaped)."""
        if self._stopped:
            return False
        try:
            exited, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            exited = self.pid
        if exited:
            self._stopped = True  # reaped: never to be signalled again
        return not exited

    def _progress(self) -> tuple[bytes, Identity, int, int, bool]:
        header = os.pread(self.memory, HEADER.size, 0)
        if len(header) != HEADER.size:
            return b"", (0, 0, 0, 0, 0), HEADER.size, 0, False
        magic, *read, end, covered, finished = HEADER.unpack(header)
        return magic, tuple(read), end, covered, bool(finished)

    def records(self, wanted: Identity) -> Generator[Chunk | bytes, None, None] | None:
        """The records of the file ``wanted`` names, while the child writes them: blocks of
        lines, then (if it finished) the unterminated last line, maybe empty; :attr:`covered`
        says how far they went once iterated. ``None`` if the child read another file. The
        child is reaped and the memory file closed by the end (or at once, on ``None``),
        except where the child finished and has a request channel: iterated to its end, the
        offer is then kept, the child waiting for a request (:mod:`pitrio._preparse_prefix`)."""
        magic, read, *_ = self._progress()
        if magic == MAGIC and read != wanted:
            self.close()
            return None
        return self._records(wanted)

    def _records(self, wanted: Identity) -> Generator[Chunk | bytes, None, None]:
        import marshal

        memory, at = self.memory, HEADER.size
        # One buffer for every record: a new 1 MB bytes for each would be new pages each time
        # (faulted in and zeroed: a third of the cost of taking the records).
        buffer = bytearray(BLOCK + (BLOCK >> 2))
        kept = False
        try:
            while True:
                magic, read, end, covered, finished = self._progress()
                if magic != MAGIC or read != wanted:
                    break  # not begun (or, at the last look, another file): nothing taken
                if at >= end:
                    self.covered = covered
                    if finished and not self._stopped and self.requests >= 0:
                        # Every record taken from a child that waits now: kept for a request
                        # (the records' identity is the one the session read).
                        self.end, self.read, kept = end, read, True
                    if finished or self._stopped:
                        break
                    self.stop()  # caught up with it: the rest is read in-process
                    continue  # one more look: a record may have been ended meanwhile
                while at < end:
                    (length,) = LENGTH.unpack(os.pread(memory, LENGTH.size, at))
                    at += LENGTH.size
                    if length > len(buffer):
                        buffer = bytearray(length)
                    view = memoryview(buffer)[:length]
                    if os.preadv(memory, [view], at) != length:
                        raise OSError("a short record")
                    record = marshal.loads(view)
                    view.release()
                    at += length
                    if isinstance(record, bytes):
                        yield record  # the last line, unterminated
                        continue
                    size, ids, parents, roles, bounds, starts = record
                    at = -(-at // PAGE) * PAGE
                    lines = _mapped(memory, at, size, bounds, starts)
                    if len(lines) != len(ids):
                        raise ValueError("a record whose lines and checks differ in number")
                    yield lines, ids, parents, roles
                    at += size
        finally:
            if kept:
                _KEPT.append(self)
            else:
                self.close()


def _mapped(memory: int, at: int, size: int, bounds: bytes, starts: bytes) -> MappedLines:
    """The block of ``size`` bytes at ``at`` and its offsets: mapped with its pages already
    in the page tables (the child's pages, no copy; faulting them one by one cost as much as
    the copy), or read where mapping fails."""
    offsets, found = array("Q"), array("Q")
    offsets.frombytes(bounds)
    found.frombytes(starts)
    if len(offsets) != len(found) or offsets[0] != 0 or offsets[-1] != size:
        raise ValueError("a record whose offsets do not fit its block")
    data: mmap.mmap | bytes
    try:
        flags = mmap.MAP_SHARED | mmap.MAP_POPULATE  # Linux's, as memory files are
        data = mmap.mmap(memory, size, flags=flags, prot=mmap.PROT_READ, offset=at)
    except (OSError, ValueError, OverflowError, AttributeError):
        data = os.pread(memory, size, at)
        if len(data) != size:
            raise OSError("a short block") from None
    return MappedLines(data, offsets, found)


def _reap(pid: int, then: Callable[[], None] | None = None) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    if then is not None:
        then()


_OFFERS: list[Offer] = []
"""The one pending offer, if any (a list: ``pop`` takes it atomically from any thread)."""

_KEPT: list[Offer] = []
"""The offer whose records were all taken and whose child waits for a prefix request, if any
(:mod:`pitrio._preparse_prefix` takes it)."""


_CHILD = (
    "import sys; sys.path[:0] = sys.argv[7:]; from pitrio._preparse_child import _child; "
    "_child(sys.argv[1], *map(int, sys.argv[2:7]))"
)
"""The child's program: :func:`pitrio._preparse_child._child`, found where this process finds
it."""


def start(path: str, requests: bool = True) -> bool:
    """Start a child that parses ``path`` (call before threads exist: the memory file is
    inheritable for the moment of the spawn); whether one started. With ``requests`` false
    the child has no request channel and exits once its records are written.

    The child is a new interpreter (``posix_spawn``), not a fork: a forked child shares this
    process's pages until it exits, and each page this process then writes (the imports
    write ~900 of them) is copied first, ~5 ms of this process's CPU on the resume's path
    (measured; the new interpreter's ~10 ms of start-up are the child's, on the other
    core). It runs without ``site`` or the environment's ``PYTHON*`` variables (``-I -S``),
    on this process's ``sys.path``, with its standard streams on ``/dev/null`` from the
    start: the protocol's pipes and the terminal are this process's (a reader waiting for
    its EOF must not wait for the child too)."""
    create = getattr(os, "memfd_create", None)
    spawn = getattr(os, "posix_spawn", None)
    if create is None or spawn is None or not sys.executable or getattr(sys, "frozen", False):
        return False  # (a frozen application's executable is not an interpreter to run)
    try:
        memory = create("pitrio-preparse")
    except OSError:
        return False
    if memory <= 2:
        # A standard stream was closed: the descriptor is the process's stdin, stdout or
        # stderr now, and RPC mode must find it closed as it was (it refuses to start).
        os.close(memory)
        return False
    # The prefix request channel (:mod:`pitrio._preparse_prefix`): the child reads a request
    # from one pipe and answers on the other; this process keeps the other ends.
    made: list[int] = []
    try:
        if requests:
            made.extend(os.pipe())
            made.extend(os.pipe())
    except OSError:
        made.append(memory)
        for fd in made:
            os.close(fd)
        return False
    request_read, request_write, answer_read, answer_write = made or (-1, -1, -1, -1)
    passed = [memory, *made[0:1], *made[3:4]]
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds pitrio/
    parent = os.getpid()  # passed: a parent gone before the child looks is noticed too
    argv = [sys.executable, "-I", "-S", "-c", _CHILD, path, str(memory), str(parent)]
    argv += [str(BLOCK), str(request_read), str(answer_write), home, *sys.path]
    null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    try:
        for fd in passed:
            os.set_inheritable(fd, True)
        pid = spawn(sys.executable, argv, os.environ, file_actions=null)
    except (OSError, ValueError):
        for fd in (memory, *made):
            os.close(fd)
        return False
    os.set_inheritable(memory, False)  # no later child of this process gets it
    for fd in passed[1:]:
        os.close(fd)  # the child's ends: its exit is then this process's end of the pipe
    _OFFERS.append(Offer(pid, memory, request_write, answer_read))
    return True


def take(wanted: os.stat_result) -> Offer | None:
    """The pending offer, if any, for the file ``wanted`` (an ``fstat`` of it, opened by the
    taker): iterate :meth:`Offer.records` (``None`` there if the child read another file).
    The offer is no longer pending after this."""
    try:
        return _OFFERS.pop()
    except IndexError:
        return None


def discard() -> None:
    """Give up a pending offer that was not taken: the child killed if still running, reaped,
    its memory file closed (after a start, so no child outlives its use as a zombie). An
    offer taken whole and kept for a prefix request is not pending: see :func:`release`."""
    while _OFFERS:
        _OFFERS.pop().close()


@contextlib.contextmanager
def discarded_after() -> Iterator[None]:
    """:func:`discard` when the block ends, however it ends: around a session's start, which
    takes the offer if it opens the file it was made for."""
    try:
        yield
    finally:
        discard()


def release() -> None:
    """No prefix request will be made: the child kept for one (if any) is killed and reaped,
    its memory file and channel closed. Not needed at exit: the child reads the channel's
    end when this process's descriptors close, and exits (then reaped by init)."""
    while _KEPT:
        _KEPT.pop().close()


def idle_core() -> bool:
    """Whether another core is free now: this process may run on two or more, and no more
    tasks are runnable than it has (``/proc/loadavg``'s fourth field, this process
    included). Where none is, the child's CPU would be taken from the parent's share (Linux
    groups a session's processes for fairness) and its work mostly wasted: on the shared
    machine at load 11-21 the resume took 1.9 s with a child against 1.2 s without."""
    try:
        cores = len(os.sched_getaffinity(0))
        with open("/proc/loadavg", "rb") as file:
            running = int(file.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    allowed = quota_cores()
    if allowed is not None:  # a container's CPU quota: its cores are not all its own
        cores = min(cores, int(allowed))
    return cores >= 2 and running <= cores


def quota_cores(
    root: str = "/sys/fs/cgroup", membership: str = "/proc/self/cgroup"
) -> float | None:
    """The cores' worth of CPU time this process's control group may use (its CFS quota
    over its period, the tightest of the group and its ancestors: cgroup v2's ``cpu.max``
    or v1's ``cpu.cfs_quota_us``), ``None`` where no quota applies or none can be read. A
    container given one core of a larger machine sees every core in its affinity mask."""
    try:
        with open(membership, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    tightest: float | None = None
    files: tuple[str, ...]
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if hierarchy == "0" and not controllers:
            base, files = root, ("cpu.max",)
        elif "cpu" in controllers.split(","):
            base, files = f"{root}/{controllers}", ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        path = group.rstrip("/")
        while True:
            found = _quota_at(f"{base}{path}", files)
            if found is not None and (tightest is None or found < tightest):
                tightest = found
            if not path:
                break
            path = path.rpartition("/")[0]
    return tightest


def _quota_at(folder: str, files: tuple[str, ...]) -> float | None:
    """The quota in cores one control group's files state (``None``: none, or unreadable)."""
    try:
        texts = []
        for name in files:
            with open(f"{folder}/{name}", encoding="ascii") as file:
                texts.append(file.read())
        fields = " ".join(texts).split()
        quota, period = fields[0], int(fields[1])
        if quota in ("max", "-1") or period <= 0:
            return None
        return int(quota) / period
    except (OSError, ValueError, IndexError):
        return None


def start_for(argv: Sequence[str]) -> bool:
    """Start a child for the session file ``argv`` opens in RPC mode, if any and if a core
    is free for it (the launcher's call, before pitrio is imported)."""
    try:
        path = named_session(argv, os.getcwd())
    except OSError:
        return False
    return path is not None and idle_core() and start(path)
