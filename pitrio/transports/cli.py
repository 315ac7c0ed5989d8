"""The ``pitrio`` command line: print mode (``-p``), JSON mode (``--mode json``) and RPC mode
(``--mode rpc``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

import trio

from pitrio.messages.agent import THINKING_LEVELS
from pitrio.sdk.mcp import McpConfigFlag
from pitrio.transports.interrupt import default_sigint, exit_code
from pitrio.transports.print_mode import build_prompts, run_print_mode


class _Parser(argparse.ArgumentParser):
    """Bad flags are start-up errors: message on stderr, exit code 1 (pi's), not argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"Error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pitrio``."""
    parser = _Parser(prog="pitrio", description="Run pi-compatible agent sessions on trio.")
    parser.add_argument("messages", nargs="*", help="prompts, run one after another")
    parser.add_argument("-p", "--print", action="store_true", help="print mode: final reply only")
    parser.add_argument("--mode", default="text", help="text (default), json or rpc")
    parser.add_argument("--provider", help="provider of --model when it has no provider/ prefix")
    parser.add_argument("--model", help="model as provider/id (default faux/echo)")
    parser.add_argument("--thinking", choices=THINKING_LEVELS, help="thinking level")
    parser.add_argument("--no-session", action="store_true", help="do not write a session file")
    parser.add_argument("--session-dir", help="directory for session files")
    parser.add_argument("--session", help="open a session file (a path, or a session id prefix)")
    parser.add_argument(
        "-c",
        "--continue",
        dest="continue_recent",
        action="store_true",
        help="continue the most recent session of this directory",
    )
    parser.add_argument("--fork", help="start a new session forked from a session (path or id)")
    parser.add_argument(
        "--models", help="comma-separated model patterns that cycle_model walks (RPC mode)"
    )
    parser.add_argument("--tools", help="comma-separated names of the tools to activate")
    parser.add_argument("--no-tools", action="store_true", help="activate no tools")
    parser.add_argument(
        "-e",
        "--extension",
        action="append",
        default=[],
        metavar="PATH",
        help="load a Python extension (a file or package with setup(api)); repeatable",
    )
    parser.add_argument(
        "--no-extensions",
        action="store_true",
        help="do not discover extensions (only -e ones load)",
    )
    parser.add_argument("--mcp-config", action=McpConfigFlag, metavar="FILE", help="MCP servers")
    parser.add_argument("--offline", action="store_true", help="no start-up network access")
    parser.add_argument(
        "--trace", metavar="FILE", help="record the session's actor messages (pitrio trace)"
    )
    parser.add_argument(
        "--trace-payloads", action="store_true", help="with --trace: record message payloads"
    )
    parser.add_argument(
        "--list-models",
        nargs="?",
        const="",
        default=None,
        metavar="SEARCH",
        help="list the available models (optionally matching SEARCH) and exit",
    )
    return parser


def _model_ref(provider: str | None, model: str | None) -> str | None:
    if model and provider and "/" not in model:
        return f"{provider}/{model}"
    return model


def _read_stdin() -> str | None:
    """Piped stdin as UTF-8, trimmed (``None`` when stdin is a terminal or absent).

    Bytes that are not UTF-8 become U+FFFD, as with Node's utf8 decoding in pi; they must not
    turn into lone surrogates, which no later encoder accepts.
    """
    stream = sys.stdin
    if stream is None or stream.isatty():
        return None
    try:
        binary = getattr(stream, "buffer", None)
        if binary is None:  # a text-only replacement of sys.stdin
            return str(stream.read()).strip()
        data = binary.read()
    except (OSError, ValueError):
        return None
    return bytes(data).decode("utf-8", errors="replace").strip()


def _split_names(value: str | None) -> list[str]:
    return [name.strip() for name in (value or "").split(",") if name.strip()]


def _rpc_mode(args: argparse.Namespace) -> int:
    """``--mode rpc``: the options of the session, then serve stdin/stdout until EOF."""
    from pitrio import SessionOptions
    from pitrio.transports.rpc.server import run_rpc

    if any(message.startswith("@") for message in args.messages):
        sys.stderr.write("Error: @file arguments are not supported in RPC mode\n")
        return 1
    warnings: list[str] = []
    active_tools: list[str] | None = None
    if args.no_tools:
        active_tools = []
    elif args.tools is not None:
        active_tools = _split_names(args.tools)
    options = SessionOptions(
        model=_model_ref(args.provider, args.model),
        thinking_level=args.thinking,
        session=args.session,
        continue_recent=args.continue_recent,
        fork=args.fork,
        persist=not args.no_session,
        session_dir=args.session_dir,
        active_tools=active_tools,
        extensions=tuple(args.extension),
        no_extensions=args.no_extensions,
        extension_args=args.extension_args,
        ui_clients=True,
        sync_inline=True,  # one session per process: no worker-thread hop per append
    )
    return run_rpc(options, model_patterns=_split_names(args.models), warnings=warnings)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pitrio`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sessions"]:
        from pitrio.transports.sessions_cli import run_sessions_command

        return run_sessions_command(argv[1:])
    if argv[:1] == ["db"]:
        from pitrio.transports.db_cli import run_db_command

        return run_db_command(argv[1:])
    if argv[:1] == ["serve"]:
        from pitrio.transports.serve import serve_main

        return serve_main(argv[1:])
    if argv[:1] == ["trace"]:
        from pitrio.transports.trace_cli import run_trace_command

        return run_trace_command(argv[1:])
    if argv[:1] == ["attach"]:
        from pitrio.transports.attach import attach_main

        return attach_main(argv[1:])
    parser = build_parser()
    args, extension_args = parser.parse_known_args(argv)
    stray = [arg for arg in extension_args if not arg.startswith("--")]
    if stray:  # only --flags may be left for extensions; anything else is a plain mistake
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    args.extension_args = tuple(extension_args)
    if args.trace is not None:  # the same command line, every session recorded
        from pitrio.transports.trace_cli import recording_sessions, without_trace_flags

        with recording_sessions(args.trace, payloads=args.trace_payloads):
            return main(without_trace_flags(argv))
    if args.list_models is not None:
        from pitrio.transports.models_cli import list_models_command

        return list_models_command(args.list_models or None)
    default_sigint()  # no KeyboardInterrupt: SIGINT kills, or ends the session cleanly
    if args.mode == "rpc":
        return exit_code(_rpc_mode(args))
    json_mode = args.mode == "json"
    prompts = build_prompts(args.messages, _read_stdin())
    code = trio.run(
        lambda: run_print_mode(
            prompts,
            json_mode=json_mode,
            model=_model_ref(args.provider, args.model),
            persist=not args.no_session,
            session_dir=args.session_dir,
            thinking_level=args.thinking,
            session_options={
                "session": args.session,
                "continue_recent": args.continue_recent,
                "fork": args.fork,
                "extensions": tuple(args.extension),
                "no_extensions": args.no_extensions,
                "extension_args": args.extension_args,
            },
            sigint=True,
        )
    )
    return exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
