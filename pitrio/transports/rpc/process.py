"""RPC mode as a process: stdin and stdout taken over for the protocol, the session started,
signals turned into exit codes, the :class:`~pitrio.transports.rpc.server.RpcServer` run until
EOF or a signal (``pitrio --mode rpc``).

Split from :mod:`.server`, which serves one byte stream and knows nothing of the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import attrs
import trio

from pitrio import _preparse as preparse
from pitrio.errors import PitrioError, collapse_groups
from pitrio.sdk.models import start_model_router
from pitrio.sdk.session import (
    ModelScope,
    SessionOptions,
    SessionRuntime,
    ShutdownRequest,
    collector_paused,
    freeze_bulk_loads,
)
from pitrio.transports.interrupt import exit_code
from pitrio.transports.rpc.commands import describe
from pitrio.transports.rpc.scope import resolve_scope
from pitrio.transports.rpc.server import EXIT_SIGNALS, SHUTDOWN_SECONDS, RpcServer


class NoStdioError(PitrioError):
    """stdin or stdout is closed: there is nothing to serve."""


@contextmanager
def stdout_takeover() -> Iterator[tuple[int, int]]:
    """Give the protocol private copies of stdin and stdout; point fd 1 (and ``sys.stdout``)
    at stderr and fd 0 at ``/dev/null`` for everything else (libraries, child processes).

    Yields the protocol's (input fd, output fd); restores the process's fds on exit.
    """
    sys.stdout.flush()
    try:
        protocol_in, protocol_out = os.dup(0), os.dup(1)
        saved_in, saved_out = os.dup(0), os.dup(1)
    except OSError as exc:
        raise NoStdioError(f"RPC mode needs stdin and stdout: {exc}") from exc
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    previous = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield protocol_in, protocol_out
    finally:
        sys.stdout = previous
        for saved, target in ((saved_in, 0), (saved_out, 1)):
            # trio made the shared file description non-blocking; give it back as found.
            with contextlib.suppress(OSError):
                os.set_blocking(saved, True)
            os.dup2(saved, target)
            os.close(saved)


PIPE_SIZE = 1 << 20
"""Capacity asked for an output pipe (Linux's default maximum for unprivileged processes)."""


def _widen_pipe(fd: int) -> None:
    """Give a pipe on ``fd`` a 1 MB buffer (Linux; 64 KB by default): long streams are
    written in fewer, larger writes with fewer wake-ups of either side (issue 7: a
    20,000-delta full-form reply is ~1.6 GB). Anything else (a file, a tty, another OS, a
    lower limit) is left as it is."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, set_size, PIPE_SIZE)


async def serve_process(
    options: SessionOptions,
    *,
    stdin_fd: int,
    stdout_fd: int,
    model_patterns: Sequence[str] = (),
    warnings: Sequence[str] = (),
) -> int:
    """Run RPC mode on the given fds until EOF or a signal; returns the exit code."""
    import pitrio

    code = 0
    with trio.open_signal_receiver(*EXIT_SIGNALS) as signals:
        async with trio.open_nursery() as root:
            main = trio.CancelScope()

            async def on_signal() -> None:
                nonlocal code
                async for signum in signals:
                    if code in EXIT_SIGNALS.values():
                        os._exit(exit_code(code))  # a second request while shutting down
                    code = EXIT_SIGNALS[signal.Signals(signum)]
                    main.cancel()

            root.start_soon(on_signal)
            runtime: SessionRuntime | None = None
            with main:
                freeze_bulk_loads()  # one session per process: its bulk loads too
                try:
                    # The launcher's parsing child, if the session did not take what it read
                    # (another file was opened), is reaped as the start ends: no zombie.
                    # The collector off through the start, and what it made (the router, the
                    # session, a resumed file's entries: all live as long as the process)
                    # frozen once it succeeded: no collection walks it, then or later (a
                    # 14 ms one between the read and the first reply; issue 38).
                    with collector_paused(freeze=True), preparse.discarded_after():
                        router = await start_model_router(root, faux=pitrio.default_faux())
                        # Runs of streamed deltas reach the forwarder whole (issue 38).
                        runtime = SessionRuntime(root, router, runs=True)
                        scope = ModelScope()  # extensions' ctx.scoped_models, once resolved
                        shutdown = ShutdownRequest()  # extensions' ctx.shutdown()
                        with collapse_groups():
                            started = await runtime.start(
                                attrs.evolve(options, model_scope=scope, shutdown=shutdown)
                            )
                        # A child kept for the resumed transcript's request items that the
                        # session did not ask (another API): reaped now, not at exit.
                        preparse.release()
                        patterns = model_patterns or started.enabled_models  # pi's order
                        source = "--models" if model_patterns else "enabledModels"
                        scoped, scope_warnings = await resolve_scope(router, patterns, source)
                        scope.models = scoped
                except PitrioError as exc:
                    from pitrio.transports.cli_hints import startup_error_text

                    sys.stderr.write(f"Error: {startup_error_text(exc)}\n")
                    sys.stderr.flush()
                    code = 1
                else:
                    for line in (*warnings, *scope_warnings, *started.notices):
                        sys.stderr.write(line + "\n")
                    sys.stderr.flush()
                    stdin = trio.lowlevel.FdStream(stdin_fd)
                    _widen_pipe(stdout_fd)
                    stdout = trio.lowlevel.FdStream(stdout_fd)
                    server = RpcServer(
                        runtime, router, stdout, scoped_models=scoped, shutdown=shutdown
                    )
                    await server.serve(stdin)
            if runtime is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_SECONDS):
                    await runtime.aclose()
            root.cancel_scope.cancel()
    return code


def run_rpc(
    options: SessionOptions,
    *,
    model_patterns: Sequence[str] = (),
    warnings: Sequence[str] = (),
) -> int:
    """``pitrio --mode rpc``: serve stdin/stdout; returns the process exit code."""
    try:
        with stdout_takeover() as (stdin_fd, stdout_fd):
            return trio.run(
                lambda: serve_process(
                    options,
                    stdin_fd=stdin_fd,
                    stdout_fd=stdout_fd,
                    model_patterns=model_patterns,
                    warnings=warnings,
                )
            )
    except NoStdioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except Exception as exc:
        # A bug that escaped every handler: one line naming the error inside the nursery's
        # group, not the group's traceback (issue 21).
        sys.stderr.write(f"Error: internal error: {describe(exc)}\n")
        sys.stderr.flush()
        return 1
