"""The fork server of ``pitrio serve --workers N``: workers start as forks, not imports.

A worker process imports the whole runtime (about 0.65 s of CPU); a fork of a process that
already did costs a few milliseconds. The fork server is that process: it holds the worker
modules, never runs trio (a fork of a process running trio cannot run trio again), and forks
each worker the acceptor asks for. The first one is forked by the acceptor itself before it
enters ``trio.run`` (:func:`fork_server`); one that dies is replaced by a new process
(``python -m`` this module: one import, once). It is its workers' only parent: it reaps
each and reports its exit code.

The protocol is one ``SOCK_SEQPACKET`` pair, a JSON object per message:

* acceptor -> server: ``{"op": "fork", "id", "argv", "name", "fd_options"}`` with the
  worker's descriptors (``SCM_RIGHTS``); the child runs the target on ``argv`` plus, for
  each descriptor received, its option in ``fd_options`` and its number there.
* server -> acceptor: ``{"op": "forked", "id", "pid"}`` with the child's pidfd (signals sent
  through it can never reach another process that took a reused pid; it turns readable when
  the child has exited, its descriptors closed), or ``{"op": "failed", "id", "error"}``;
  later ``{"op": "exited", "pid", "code"}`` once the child is reaped.

A forked worker starts clean (:func:`_become_worker`): its own session (a terminal's Ctrl-C
reaches the acceptor alone), killed by the kernel should the fork server die
(``PR_SET_PDEATHSIG``: never a worker left running unowned), every descriptor but its own
and the standard three closed, ``random`` reseeded (by ``os.fork`` itself), and its name
(``/proc/PID/comm``) ``pitrio-workerN``. The server exits once the acceptor closed its end
and every worker is gone (those that do not go within :data:`ORPHAN_SECONDS` are killed).
"""

from __future__ import annotations

import array
import ctypes
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any, NoReturn

import orjson
import trio

from pitrio import logs
from pitrio.errors import PitrioError

log = logging.getLogger("pitrio.daemon.workers")

Target = Callable[[list[str]], int]
"""What a forked child runs: its argv in, its exit code out."""
MAX_MESSAGE = 1 << 20
"""The longest request (a worker's argv)."""
MAX_FDS = 8
ORPHAN_SECONDS = 15.0
"""How long the workers have to exit on their own once the acceptor went away."""
EXIT_PARENT_GONE = 70
"""A child's exit code when its fork server died before it was set up."""
SERVER_NAME = "pitrio-forks"
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def _prctl(option: int, value: int | bytes) -> None:
    """``prctl(2)``, best effort (not Linux: nothing)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def name_process(name: str) -> None:
    """Set this process's name as ``ps`` and ``/proc/PID/comm`` show it (15 bytes at most)."""
    _prctl(_PR_SET_NAME, name.encode()[:15])


# -- the server (no trio here) -------------------------------------------------------------


def can_fork_here() -> bool:
    """Whether this process may fork the fork server: one thread (a fork keeps only the
    calling one; a lock another held stays held) and no telemetry active (its exporters'
    threads, and a worker reporting to the acceptor's exporters). Otherwise the fork server
    is a process of its own, its workers without telemetry as a new interpreter's are."""
    from pitrio import telemetry

    return threading.active_count() == 1 and telemetry.active() is None


def fork_server(target: Target) -> tuple[socket.socket, int]:
    """Fork the fork server from this process (which must not be running trio, and should
    have imported what ``target`` needs): the acceptor's end of its socket and its pid."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # the fork server
        code = 1
        try:
            ours.close()
            os.setsid()  # Ctrl-C at a terminal is the acceptor's alone
            name_process(SERVER_NAME)
            code = serve(theirs, target)
        finally:
            _leave(code)
    theirs.close()
    return ours, pid


def serve(sock: socket.socket, target: Target) -> int:
    """Fork a child running ``target`` for each request on ``sock``, reap each and report its
    exit, until the acceptor closes its end and every child has exited; the exit code."""
    children: dict[int, int] = {}  # pidfd -> pid
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    gone_since: float | None = None
    while children or gone_since is None:
        timeout = None if gone_since is None else 1000
        for fd, _ in poller.poll(timeout):
            if fd != sock.fileno():
                _reap(sock, fd, children.pop(fd), gone_since is None)
                poller.unregister(fd)
                continue
            request = _receive(sock)
            if request is None:  # the acceptor went away: its workers follow (their link)
                poller.unregister(sock)
                gone_since = _now()
                continue
            message, fds = request
            try:
                reply, pidfd = _fork(sock, message, fds, target)
            finally:
                for received in fds:
                    os.close(received)
            if pidfd is not None:
                children[pidfd] = reply["pid"]
                poller.register(pidfd, select.POLLIN)
            _send(sock, reply, [] if pidfd is None else [pidfd])
        if gone_since is not None and _now() - gone_since > ORPHAN_SECONDS:
            for pidfd in children:
                with suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    return 0


def _now() -> float:
    return float(os.times().elapsed)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next request and its descriptors; ``None`` once the acceptor's end is closed."""
    try:
        data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
    except OSError:
        return None
    if not data and not fds:
        return None
    try:
        message = orjson.loads(data)
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or not isinstance(message, dict):
            raise ValueError("truncated or not an object")
    except ValueError:
        log.error("fork server: malformed request dropped")
        message = {"op": "malformed"}
    return message, list(fds)


def _send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int]) -> None:
    with suppress(OSError):  # the acceptor went away: its end's closing is seen next
        socket.send_fds(sock, [orjson.dumps(message)], list(fds))


def _fork(
    sock: socket.socket,
    message: dict[str, Any],
    fds: list[int],
    target: Target,
) -> tuple[dict[str, Any], int | None]:
    """Fork one child for ``message``: the reply and the child's pidfd (``None``: failed)."""
    ident = message.get("id")
    argv = message.get("argv")
    options = message.get("fd_options") or []
    if (
        message.get("op") != "fork"
        or not isinstance(argv, list)
        or not all(isinstance(word, str) for word in argv)
        or not isinstance(options, list)
        or len(options) != len(fds)
    ):
        return {"op": "failed", "id": ident, "error": "malformed fork request"}, None
    for option, fd in zip(options, fds, strict=True):
        argv = [*argv, str(option), str(fd)]
    name = str(message.get("name") or "pitrio-worker")
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        return {"op": "failed", "id": ident, "error": f"cannot fork: {exc}"}, None
    if pid == 0:
        _become_worker(sock, parent, fds, name, argv, target)
    # Opened before this process could reap it: the pid is still this child's.
    pidfd = os.pidfd_open(pid)
    return {"op": "forked", "id": ident, "pid": pid}, pidfd


def _reap(sock: socket.socket, pidfd: int, pid: int, report: bool) -> None:
    """Reap the child ``pid`` (its pidfd turned readable) and report its exit code."""
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    if report:
        _send(sock, {"op": "exited", "pid": pid, "code": os.waitstatus_to_exitcode(status)}, [])


def _become_worker(
    sock: socket.socket, parent: int, own: list[int], name: str, argv: list[str], target: Target
) -> NoReturn:
    """The forked child: made clean, then ``target(argv)``; never returns (``os._exit``)."""
    code = 1
    try:
        # Taken from the socket object first: its finalizer must not close a number the
        # worker reuses.
        os.close(sock.detach())
        os.setsid()
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the server died before the death signal was set
            _leave(EXIT_PARENT_GONE)
        name_process(name)
        _close_all_but(own)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = [sys.argv[0], *argv]
        code = target(argv)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        log.exception("worker failed")
    _leave(code)


def _close_all_but(own: Sequence[int]) -> None:
    """Close every descriptor but the standard three and ``own``: the listening socket, the
    other workers' sockets and pidfds, the server's own socket never reach a worker."""
    keep = {0, 1, 2, *own}
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        if fd not in keep:
            with suppress(OSError):  # the directory's own descriptor, closed meanwhile
                os.close(fd)


def _leave(code: int) -> NoReturn:
    """Exit a forked process: its output flushed, no inherited exit handler run."""
    with suppress(Exception):
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code)


def received_fds(ancillary: list[Any]) -> list[int]:
    """The descriptors an ``SCM_RIGHTS`` message carried (``recvmsg``'s ancillary data)."""
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return list(fds)


# -- the acceptor's side (in trio) -----------------------------------------------------------

REPORT_SECONDS = 5.0
"""How long an exited child's code may take to be reported (a fork server that is stopped
or gone: the code is unknown)."""
START_ATTEMPTS = 2


class ForkServerError(PitrioError):
    """No fork server could fork a worker."""


class Child:
    """A process the fork server forked, as the acceptor sees it: signalled through its
    pidfd (never another process that took a reused pid), awaited until it exited."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd: int | None = pidfd
        self.code: int | None = None
        """Its exit code as the fork server reported it (``None``: unknown)."""
        self.reported = trio.Event()
        self.exited = False

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` unless it exited (then nothing)."""
        if self._pidfd is not None:
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        """SIGKILL, unless it exited."""
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int | None:
        """Wait until it exited (its descriptors are closed then); its exit code, ``None``
        when its fork server could not say."""
        assert self._pidfd is not None, "waited for twice"
        try:
            await trio.lowlevel.wait_readable(self._pidfd)
            with trio.move_on_after(REPORT_SECONDS):
                await self.reported.wait()
        finally:
            pidfd, self._pidfd = self._pidfd, None
            trio.lowlevel.notify_closing(pidfd)
            os.close(pidfd)
        self.exited = True
        return self.code


class _Server:
    """One fork server process: its socket, how to kill and reap it, its children."""

    def __init__(
        self,
        sock: trio.socket.SocketType,
        pid: int,
        kill: Callable[[], None],
        reap: Callable[[], Awaitable[object]],
    ) -> None:
        self.sock = sock
        self.pid = pid
        self.kill = kill
        self.reap = reap
        self.children: dict[int, Child] = {}
        self.replies: trio.MemorySendChannel[tuple[dict[str, Any], Child | None] | None]
        self.replies_out: trio.MemoryReceiveChannel[tuple[dict[str, Any], Child | None] | None]
        self.replies, self.replies_out = trio.open_memory_channel(1)
        self.done = trio.Event()


class Forks:
    """The acceptor's client of its fork server: :meth:`spawn` forks a worker; a fork server
    that died is replaced at the next spawn (its workers died with it). Run :meth:`run` in a
    nursery first; :meth:`aclose` lets the fork server exit and reaps it."""

    def __init__(self, first: tuple[socket.socket, int] | None = None) -> None:
        self._first = first
        self._server: _Server | None = None
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()
        self._closed = trio.Event()
        self.closing = False
        self.started = 0
        """How many fork servers this client started (the first one forked excluded)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the fork servers' reports until :meth:`aclose`."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self._first is not None:
                sock, pid = self._first
                self._first = None
                self._watch(sock, pid, None)
            task_status.started()
            await self._closed.wait()
            nursery.cancel_scope.cancel()

    @property
    def server_pid(self) -> int | None:
        """The fork server's pid while it runs."""
        return None if self._server is None else self._server.pid

    async def spawn(
        self, argv: list[str], fds: Sequence[int], fd_options: Sequence[str], name: str
    ) -> Child:
        """Fork a worker running on ``argv`` (and ``fds`` as ``fd_options``), named ``name``."""
        async with self._lock:
            for _ in range(START_ATTEMPTS):
                server = self._server if self._server is not None else await self._start()
                request = {
                    "op": "fork",
                    "id": 0,
                    "argv": argv,
                    "name": name,
                    "fd_options": list(fd_options),
                }
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                reply: tuple[dict[str, Any], Child | None] | None = None
                # Shielded: a reply left unread would answer the next request.
                with (
                    trio.CancelScope(shield=True),
                    trio.move_on_after(REPORT_SECONDS),
                    suppress(OSError, trio.ClosedResourceError),
                ):
                    await server.sock.sendmsg([orjson.dumps(request)], rights)
                    reply = await server.replies_out.receive()
                if reply is None:  # gone, going or stuck: it is replaced
                    server.kill()
                    await server.done.wait()
                    continue
                message, child = reply
                if child is not None:
                    return child
                raise ForkServerError(f"cannot start a worker: {message.get('error')}")
        raise ForkServerError("the fork server keeps exiting; cannot start a worker")

    async def aclose(self, seconds: float) -> None:
        """Close the fork server's socket (it exits once its children have), wait for it
        ``seconds`` at most, then kill it."""
        self.closing = True
        server = self._server
        if server is not None:
            server.sock.close()
            with trio.move_on_after(seconds):
                await server.done.wait()
            if not server.done.is_set():
                server.kill()
                await server.done.wait()
        self._closed.set()

    async def _start(self) -> _Server:
        """A new fork server: a process of its own (this one runs trio: it cannot fork one)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.started += 1
        logs.event(log, "fork_server_started", pid=process.pid)
        return self._watch(ours, process.pid, process)

    def _watch(self, sock: socket.socket, pid: int, process: trio.Process | None) -> _Server:
        """Start reading fork server ``pid``'s reports (``process``: its handle, else it is
        this process's own fork)."""
        assert self._nursery is not None, "run() first"
        if process is None:
            # Opened before anything reaps it: the pid is still the fork server's.
            pidfd = os.pidfd_open(pid)

            def kill() -> None:
                with suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)

            async def reap() -> object:
                try:
                    await trio.lowlevel.wait_readable(pidfd)
                finally:
                    trio.lowlevel.notify_closing(pidfd)
                    os.close(pidfd)
                # Readable: it has exited, the wait does not block.
                return os.waitstatus_to_exitcode(os.waitpid(pid, os.WNOHANG)[1])  # noqa: ASYNC222

            server = _Server(trio.socket.from_stdlib_socket(sock), pid, kill, reap)
        else:
            server = _Server(trio.socket.from_stdlib_socket(sock), pid, process.kill, process.wait)
        self._server = server
        self._nursery.start_soon(self._read, server)
        return server

    async def _read(self, server: _Server) -> None:
        """Take ``server``'s reports until it is gone; then its children's codes are unknown
        (they were killed with it), and it is reaped. Cancelled (the acceptor is leaving on an
        error), it is not waited for: it exits once its workers have, and they exit once this
        process is gone (their control sockets close)."""
        ended = False
        try:
            while True:
                data, ancillary, _, _ = await server.sock.recvmsg(
                    MAX_MESSAGE, socket.CMSG_SPACE(4 * MAX_FDS), socket.MSG_CMSG_CLOEXEC
                )
                fds = received_fds(ancillary)
                if not data and not fds:
                    break
                message = orjson.loads(data)
                match message.get("op"):
                    case "forked" if len(fds) == 1 and isinstance(message.get("pid"), int):
                        # Known before the reply is taken: its exit may be reported next.
                        child = server.children[message["pid"]] = Child(message["pid"], fds[0])
                        await server.replies.send((message, child))
                    case "failed":
                        await server.replies.send((message, None))
                    case "exited":
                        exited = server.children.pop(int(message.get("pid") or 0), None)
                        if exited is not None:
                            exited.code = message.get("code")
                            exited.reported.set()
                    case _:
                        for fd in fds:
                            os.close(fd)
            ended = True
        except (OSError, ValueError, trio.ClosedResourceError):
            ended = True  # gone, or broken: either way no longer usable
        finally:
            if self._server is server:
                self._server = None
            with suppress(trio.WouldBlock):
                server.replies.send_nowait(None)  # a spawn waiting for its reply
            for child in server.children.values():
                child.reported.set()
            server.sock.close()
            if ended:
                with trio.CancelScope(shield=True):
                    status = await server.reap()
                server.done.set()
                if not self.closing:
                    logs.event(
                        log, "fork_server_exited", logging.ERROR, pid=server.pid, code=status
                    )


def main(argv: Sequence[str]) -> int:
    """``python -m`` this module ``FD``: a replacement fork server on descriptor ``FD``."""
    from pitrio.transports.daemon.workers.worker import preload, worker_main

    preload()
    name_process(SERVER_NAME)
    return serve(socket.socket(fileno=int(argv[0])), worker_main)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
