"""The MCP test servers' fork server: ``python forks.py FD``, ``FD`` a listening
``SOCK_SEQPACKET`` socket, stdin a pipe from the test process that started it.

It imports the ``mcp`` SDK and what the test servers import (about a second of CPU) once,
then, for each :mod:`stub <tests.actors.mcp.servers.stub>` that connects, forks a child that
takes the stub's stdin, stdout and stderr, working directory, environment and command line
and runs the server's script (or ``-m`` module) as ``__main__``: the same code, in its own
process, on the descriptors the client reads and writes, as if started by ``python``. The
child's exit status goes back to its stub. A stub's link closing (the stub killed) kills
its child; stdin's end (the test process gone) kills every child and ends the fork server,
and each child dies with it (``PR_SET_PDEATHSIG``). It never runs an event loop: a fork of
a process running one could not run another.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import marshal
import os
import runpy
import select
import signal
import socket
import sys
import threading
import traceback

# What the servers import, loaded here so that their forks find it loaded (the point of this
# process): the SDK's server, its auth pieces, mcp-server-time, uvicorn and the protocol
# modules it picks when it starts serving.
PRELOADED = (
    "anyio._backends._asyncio",
    "anyio.to_thread",
    "mcp.server.auth.provider",
    "mcp.server.auth.settings",
    "mcp.server.mcpserver",
    "mcp.server.stdio",
    "mcp.shared.auth",
    "mcp_server_time.server",
    "uvicorn.config",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
)
for _name in PRELOADED:
    importlib.import_module(_name)

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


def run_child(request: dict[str, object], fds: list[int], parent: int) -> None:
    """In the fork: become the server the stub was started for, then exit as it did."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    argv = list(request["argv"])  # type: ignore[call-overload]
    # Named after what it runs (``ps -o comm``): its command line stays the fork server's.
    name = argv[1] if argv[0] == "-m" else os.path.basename(argv[0])
    libc.prctl(PR_SET_NAME, name.encode()[:15])
    if os.getppid() != parent:  # the fork server died before the death signal was set
        os._exit(70)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the listener, the links, other pidfds
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(argv[0])
            sys.argv = argv
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
    except BaseException:  # as the interpreter does for an uncaught exception
        traceback.print_exc()
        code = 1
    finally:
        threading._shutdown()  # type: ignore[attr-defined]  # as at interpreter exit
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def serve() -> None:
    """Fork a server per stub until stdin ends."""
    listener = socket.socket(fileno=int(sys.argv[1]))
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    poller.register(0, select.POLLIN)
    links: dict[int, tuple[socket.socket, int]] = {}  # link fd -> (link, pidfd)
    children: dict[int, tuple[int, socket.socket | None]] = {}  # pidfd -> (pid, link)
    me = os.getpid()
    while True:
        for fd, _events in poller.poll():
            if fd == 0:
                if not os.read(0, 4096):
                    for pid, _link in children.values():
                        os.kill(pid, signal.SIGKILL)
                    for pid, _link in children.values():
                        os.waitpid(pid, 0)
                    return
            elif fd == listener.fileno():
                link, _ = listener.accept()
                message, fds, _flags, _addr = socket.recv_fds(link, 1 << 20, 3)
                if len(fds) != 3 or not message:
                    for received in fds:
                        os.close(received)
                    link.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    run_child(marshal.loads(message), fds, me)
                for received in fds:
                    os.close(received)
                pidfd = os.pidfd_open(pid)
                links[link.fileno()] = (link, pidfd)
                children[pidfd] = (pid, link)
                poller.register(link, select.POLLIN)
                poller.register(pidfd, select.POLLIN)
                # The batch's other events may name descriptors closed since and reused
                # by these two: poll again (it is level-triggered, nothing is lost).
                break
            elif fd in links:
                link, pidfd = links[fd]
                data = link.recv(4096)
                if data:
                    with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped
                        signal.pidfd_send_signal(pidfd, marshal.loads(data)["signal"])
                    continue
                # The stub is gone: so is its server.
                poller.unregister(fd)
                del links[fd]
                pid, _ = children[pidfd]
                children[pidfd] = (pid, None)
                link.close()
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            elif fd in children:
                pid, link = children.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                if link is None:
                    continue
                if os.WIFSIGNALED(status):
                    reply = {"killed": os.WTERMSIG(status)}
                else:
                    reply = {"code": os.WEXITSTATUS(status)}
                with contextlib.suppress(OSError):  # the stub may die meanwhile
                    link.send(marshal.dumps(reply))
                poller.unregister(link)
                del links[link.fileno()]
                link.close()


if __name__ == "__main__":
    serve()
