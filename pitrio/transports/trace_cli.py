"""``pitrio trace summary|timeline|graph|replay FILE`` and the ``--trace`` options of the
other commands.

``--trace FILE`` (print, json and rpc modes) records every session the command starts into
FILE; ``pitrio serve --trace DIR`` records each hosted session into ``DIR/<session id>.jsonl``.
See ``docs/research.md``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import NoReturn

import orjson
import trio

from pitrio.errors import PitrioError

TRACE_FLAG = "--trace"
PAYLOADS_FLAG = "--trace-payloads"


class _Parser(argparse.ArgumentParser):
    """Unusable input exits 2 with the message (as ``pitrio sessions`` does)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"Error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``pitrio trace``."""
    parser = _Parser(prog="pitrio trace", description="Summarise, draw or replay a session trace.")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="per-actor counts, queue depths, longest waits")
    summary.add_argument("file", help="a trace written with --trace")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    timeline = commands.add_parser("timeline", help="the trace one line per record, in order")
    timeline.add_argument("file", help="a trace written with --trace")
    graph = commands.add_parser(
        "graph", help="the actors and the messages between them, as Mermaid or Graphviz dot"
    )
    graph.add_argument("file", help="a trace written with --trace")
    graph.add_argument(
        "--format", choices=("mermaid", "dot"), default="mermaid", help="default: mermaid"
    )
    replay = commands.add_parser(
        "replay", help="re-run the session with the recorded outputs and compare its events"
    )
    replay.add_argument("file", help="a trace written with --trace")
    replay.add_argument("--segment", type=int, default=1, help="which recorded session (1-based)")
    replay.add_argument(
        "--stall",
        type=float,
        default=None,
        metavar="SECONDS",
        help="give up after this long without progress (default: from the recording)",
    )
    return parser


def run_trace_command(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio trace``: exit 0 (a replay is identical), 1 (it diverged or
    stalled), 2 (unusable input)."""
    from pitrio.sdk.trace import load_trace

    args = build_parser().parse_args(list(argv))
    try:
        records = load_trace(Path(args.file))
    except OSError as exc:
        sys.stderr.write(f"Error: {args.file}: {exc.strerror or exc}\n")
        return 2
    except PitrioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 2
    if args.command == "summary":
        from pitrio.sdk.trace import render_summary, summarise, summary_json

        summary = summarise(records)
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(summary_json(summary)) + b"\n")
        else:
            sys.stdout.write(render_summary(summary))
        sys.stdout.flush()
        return 0
    if args.command == "timeline":
        from pitrio.sdk.trace import render_timeline

        sys.stdout.write(render_timeline(records))
        sys.stdout.flush()
        return 0
    if args.command == "graph":
        from pitrio.sdk.trace import actor_graph, render_graph

        sys.stdout.write(render_graph(actor_graph(records), args.format))
        sys.stdout.flush()
        return 0
    from pitrio.sdk.trace import replay_records

    try:
        result = trio.run(
            lambda: replay_records(records, segment=args.segment, stall_seconds=args.stall)
        )
    except PitrioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 2
    sys.stdout.write(result.describe())
    sys.stdout.flush()
    return 0 if result.identical else 1


def without_trace_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` without ``--trace FILE`` / ``--trace=FILE`` / ``--trace-payloads``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == TRACE_FLAG:
            skip = True
        elif arg == PAYLOADS_FLAG or arg.startswith(TRACE_FLAG + "="):
            continue
        else:
            out.append(arg)
    return out


def recording_sessions(
    file: str | None = None, directory: str | None = None, *, payloads: bool = False
) -> AbstractContextManager[None]:
    """Record every session started inside the block into ``file`` (one segment per session)
    or into ``directory`` (one file per session); neither given: record nothing."""
    if file is None and directory is None:
        return nullcontext()
    from pitrio.sdk.trace import record_to_directory, record_to_file, tracing_sessions

    if directory is not None:
        return tracing_sessions(record_to_directory(Path(directory), payloads=payloads))
    assert file is not None
    return tracing_sessions(record_to_file(Path(file), payloads=payloads))
