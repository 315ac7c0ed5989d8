"""The fork server of ``serve --workers`` in this test's process, its target a small function:
each child is forked from it (its parent), in its own session, named as asked, with its own
descriptors alone and ``random`` reseeded; its exit code is reported, a kill goes through its
pidfd, and a fork server killed takes its children with it (``PR_SET_PDEATHSIG``)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
from pathlib import Path

import trio

from pitrio.transports.daemon.workers.forkserver import Child, Forks, fork_server


def target(argv: list[str]) -> int:
    """Write what this child sees to its report socket (the descriptor after ``--report``),
    then exit with the code ``argv[0]`` names, or wait to be killed (``hang``)."""
    fds = sorted(int(entry) for entry in os.listdir("/proc/self/fd"))
    report = socket.socket(fileno=int(argv[argv.index("--report") + 1]))
    record = {
        "argv": argv,
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "sid": os.getsid(0),
        "comm": Path("/proc/self/comm").read_text().strip(),
        "random": random.random(),
        "fds": fds,
    }
    report.sendall(json.dumps(record).encode())
    report.shutdown(socket.SHUT_WR)
    if argv[0] == "hang":
        signal.pause()
    return int(argv[0])


async def spawn(forks: Forks, code: str, name: str) -> tuple[Child, dict[str, object]]:
    """A child running :func:`target`, and its report."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        child = await forks.spawn([code], [theirs.fileno()], ["--report"], name)
        theirs.close()
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours.dup()))
        data = b""
        with trio.fail_after(30):
            while chunk := await stream.receive_some():
                data += chunk
        await stream.aclose()
    return child, json.loads(data)


def test_children_are_forked_clean_reported_and_killed_through_their_pidfd() -> None:
    server = fork_server(target)  # before trio runs in this process
    server_pid = server[1]

    async def main() -> None:
        forks = Forks(server)
        async with trio.open_nursery() as nursery:
            await nursery.start(forks.run)
            one, first = await spawn(forks, "3", "pitrio-worker0")
            two, second = await spawn(forks, "5", "pitrio-worker1")
            assert await one.wait() == 3 and await two.wait() == 5
            for record, name in ((first, "pitrio-worker0"), (second, "pitrio-worker1")):
                assert record["ppid"] == server_pid  # a fork of the fork server
                assert record["sid"] == record["pid"]  # in its own session
                assert record["comm"] == name
                # The standard three, its report socket and listdir's own: not the server's
                # socket, nor the other child's pidfd or report socket.
                assert isinstance(record["fds"], list) and len(record["fds"]) <= 5, record
            argv = first["argv"]
            assert isinstance(argv, list) and argv[:2] == ["3", "--report"]
            assert first["random"] != second["random"]  # reseeded in each fork

            hung, _ = await spawn(forks, "hang", "pitrio-worker2")
            hung.kill()
            assert await hung.wait() == -signal.SIGKILL
            hung.kill()  # once it exited: nothing (its pid may be another process's now)

            orphan, record = await spawn(forks, "hang", "pitrio-worker3")
            os.kill(server_pid, signal.SIGKILL)  # its child until reaped: never another's
            with trio.fail_after(30):
                # Killed with its fork server (its death signal): nobody can report a code.
                assert await orphan.wait() is None
            assert not _alive(int(str(record["pid"])))
            await forks.aclose(5)
            nursery.cancel_scope.cancel()
        assert not _alive(server_pid)  # reaped

    trio.run(main)


def test_a_fork_server_exits_once_its_acceptor_closed_and_its_children_exited() -> None:
    server = fork_server(target)

    async def main() -> None:
        forks = Forks(server)
        async with trio.open_nursery() as nursery:
            await nursery.start(forks.run)
            child, _ = await spawn(forks, "0", "pitrio-worker0")
            assert await child.wait() == 0
            with trio.fail_after(30):
                await forks.aclose(30)  # closed: it exits on its own, and is reaped
            nursery.cancel_scope.cancel()
        assert not _alive(server[1])

    trio.run(main)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped by whoever adopted it, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
