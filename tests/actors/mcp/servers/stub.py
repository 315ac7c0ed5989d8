"""The process a client starts for a forked MCP server: ``python -I -S stub.py SOCKET ARGV...``.

It hands its own stdin, stdout and stderr (``SCM_RIGHTS``), working directory, environment
and ``ARGV`` (what would follow ``python`` on a command line: a script and its arguments, or
``-m MODULE ...``) to the fork server listening at ``SOCKET``
(:mod:`tests.actors.mcp.servers.forks`), which forks a real server process reading and
writing those very descriptors. SIGTERM, SIGINT and SIGHUP sent to this process (the SDK's
client stops its server's process group) are passed on to the server, SIGUSR1 as SIGKILL;
the server's exit status becomes this process's own (its code, or death by the same
signal). If this process dies first (SIGKILL), the fork server kills the server. Only the
standard library is imported, without ``site``: a few milliseconds of CPU, where a server
importing the ``mcp`` SDK costs about a second.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import socket
import sys

PASSED_ON = {
    signal.SIGTERM: signal.SIGTERM,
    signal.SIGINT: signal.SIGINT,
    signal.SIGHUP: signal.SIGHUP,
    # A test's "kill the server and wait until it is gone" (support.KILL_SERVER): SIGKILL
    # would end this process at once, before its server.
    signal.SIGUSR1: signal.SIGKILL,
}


def main() -> None:
    """Hand the server over, pass signals on, exit as the server exited."""
    link = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    link.connect(sys.argv[1])

    def pass_on(signum: int, _frame: object) -> None:
        # The server may have exited meanwhile: its status is then in the link already.
        with contextlib.suppress(OSError):
            link.send(marshal.dumps({"signal": int(PASSED_ON[signum])}))

    request = {"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(link, [marshal.dumps(request)], [0, 1, 2])
    # After the request: a signal before it ends this process, and the fork server, seeing
    # the link close, kills the server.
    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    reply = link.recv(4096)
    if not reply:  # the fork server is gone: the server died with it, its status unknown
        os._exit(70)
    status = marshal.loads(reply)
    if "killed" in status:
        signum = status["killed"]
        if signum != signal.SIGKILL:  # SIGKILL's handler cannot be set, nor needs to be
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # a signal whose default is not to end the process
    os._exit(status["code"])


if __name__ == "__main__":
    main()
