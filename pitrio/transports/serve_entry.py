"""The ``pitrio serve`` command: one daemon process, or an acceptor and its workers.

The choice lives here, above both: :mod:`pitrio.transports.serve` (the daemon's setup and the
one-process daemon) and :mod:`pitrio.transports.daemon.workers.acceptor` (which reuses that
setup) then import in one direction only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pitrio import logs
from pitrio.transports.serve import available_cores, build_parser, run_daemon, serve_one


def serve_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio serve``; returns the exit code."""
    args = build_parser().parse_args(list(argv))
    logs.configure(args.log_level, args.log_format)
    args.cwd = os.path.abspath(args.cwd) if args.cwd else os.getcwd()
    if args.workers is None:
        args.workers = available_cores()
    if args.workers > 1:
        from pitrio.transports.daemon.workers.acceptor import acceptor_main

        return acceptor_main(args, list(argv))
    from pitrio.transports.trace_cli import recording_sessions

    with recording_sessions(directory=args.trace, payloads=args.trace_payloads):
        return run_daemon(args, serve_one, args)
