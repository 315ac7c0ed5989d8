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
from typing import TYPE_CHECKING

import trio

from pitrio.sdk.models import FauxProvider
from pitrio.sdk.session import SessionOptions

if TYPE_CHECKING:
    from pitrio.transports.acp.backends import Daemon

USAGE = (
    "usage: pitrio acp [session flags of pitrio --mode rpc]\n"
    "       pitrio acp --connect [URL] [--token TOKEN] [--model provider/id]\n"
    "--no-editor-fs: the file tools use the disk even when the editor offers its buffers.\n"
    "Serve the Agent Client Protocol on stdin/stdout: sessions of this process, or with\n"
    "--connect those of a running pitrio serve (URL and token found as pitrio attach does).\n"
)


async def serve_acp(
    options: SessionOptions,
    faux: FauxProvider | None,
    *,
    stdin_fd: int,
    stdout_fd: int,
    daemon: Daemon | None = None,
    editor_fs: bool = True,
) -> int:
    """Serve ACP on the given fds until the end of stdin or SIGINT/SIGTERM; the exit code."""
    from pitrio.sdk.models import start_model_router
    from pitrio.transports.acp.agent import AcpServer
    from pitrio.transports.interrupt import cancel_on_signal

    async with trio.open_nursery() as root:
        router = await start_model_router(root, faux=faux)
        output = trio.lowlevel.FdStream(stdout_fd)
        server = AcpServer(router, options, output, daemon=daemon, editor_files=editor_fs)
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

    parser = session_parser(prompts=False)
    parser.add_argument("--connect", nargs="?", const="", metavar="URL", help="a daemon's sessions")
    parser.add_argument("--token", help="the daemon token (with --connect)")
    parser.add_argument(
        "--no-editor-fs",
        action="store_true",
        help="read and write files on disk even when the editor offers its buffers",
    )
    return parser


def split_connect(argv: Sequence[str]) -> tuple[list[str], str | None, str | None]:
    """``argv`` without ``--connect [URL]`` and ``--token TOKEN``; the URL (``""``: the
    running daemon's, ``None``: no ``--connect``) and the token."""
    rest: list[str] = []
    url: str | None = None
    token: str | None = None
    words = list(argv)
    while words:
        word = words.pop(0)
        if word == "--connect":
            url = words.pop(0) if words and not words[0].startswith("-") else ""
        elif word.startswith("--connect="):
            url = word.split("=", 1)[1]
        elif word == "--token" and words:
            token = words.pop(0)
        elif word.startswith("--token="):
            token = word.split("=", 1)[1]
        else:
            rest.append(word)
    return rest, url, token


def acp_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio acp``."""
    from pitrio.transports.cli import session_options_of
    from pitrio.transports.cli_args import UsageError, parse
    from pitrio.transports.rpc.commands import describe
    from pitrio.transports.rpc.process import NoStdioError, stdout_takeover

    if any(arg in ("-h", "--help") for arg in argv):
        sys.stdout.write(USAGE)
        return 0
    editor_fs = "--no-editor-fs" not in argv
    rest, url, token = split_connect([arg for arg in argv if arg != "--no-editor-fs"])
    try:
        args = parse(rest)
    except UsageError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    options, faux = session_options_of(args)
    daemon = None
    if url is not None:
        from pitrio.transports.acp.backends import Daemon
        from pitrio.transports.attach_connect import daemon_token, daemon_url

        daemon = Daemon(daemon_url(url or None), daemon_token(token), options.model)
    try:
        with stdout_takeover() as (stdin_fd, stdout_fd):
            return trio.run(
                lambda: serve_acp(
                    options,
                    faux,
                    stdin_fd=stdin_fd,
                    stdout_fd=stdout_fd,
                    daemon=daemon,
                    editor_fs=editor_fs,
                )
            )
    except NoStdioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except Exception as exc:  # a bug: one line, never a traceback
        sys.stderr.write(f"Error: internal error: {describe(exc)}\n")
        return 1
