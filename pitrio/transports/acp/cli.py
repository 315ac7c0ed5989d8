"""``pitrio acp [flags]``: serve the Agent Client Protocol on stdin/stdout.

The flags are the session flags of ``pitrio --mode rpc`` (``--model``, ``--thinking``,
``--session-dir``, ``--tools``, ``--extension``, ...): every session the editor opens starts
with them, in the ``cwd`` the editor names.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

import trio

from pitrio.sdk.models import FauxProvider
from pitrio.sdk.session import SessionOptions

USAGE = "usage: pitrio acp [session flags of pitrio --mode rpc]\n"


async def serve_acp(
    options: SessionOptions, faux: FauxProvider | None, *, stdin_fd: int, stdout_fd: int
) -> int:
    """Serve ACP on the given fds until the end of stdin or SIGINT/SIGTERM; the exit code."""
    from pitrio.sdk.models import start_model_router
    from pitrio.transports.acp.agent import AcpServer
    from pitrio.transports.interrupt import cancel_on_signal

    async with trio.open_nursery() as root:
        router = await start_model_router(root, faux=faux)
        server = AcpServer(router, options, trio.lowlevel.FdStream(stdout_fd))
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            serving = trio.CancelScope()
            root.start_soon(cancel_on_signal, signals, serving)
            with serving:
                await server.serve(trio.lowlevel.FdStream(stdin_fd))
        root.cancel_scope.cancel()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``pitrio acp`` (the session flags; for the completion script)."""
    from pitrio.transports.cli_args import build_parser as session_parser

    return session_parser(prompts=False)


def acp_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio acp``."""
    from pitrio.transports.cli import session_options_of
    from pitrio.transports.cli_args import UsageError, parse
    from pitrio.transports.rpc.commands import describe
    from pitrio.transports.rpc.server import NoStdioError, stdout_takeover

    if any(arg in ("-h", "--help") for arg in argv):
        sys.stdout.write(USAGE)
        return 0
    try:
        args = parse(list(argv))
    except UsageError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    options, faux = session_options_of(args)
    try:
        with stdout_takeover() as (stdin_fd, stdout_fd):
            return trio.run(
                lambda: serve_acp(options, faux, stdin_fd=stdin_fd, stdout_fd=stdout_fd)
            )
    except NoStdioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except Exception as exc:  # a bug: one line, never a traceback
        sys.stderr.write(f"Error: internal error: {describe(exc)}\n")
        return 1
