"""The ``pitrio`` command line: print mode (``-p``) and JSON mode (``--mode json``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import trio

from pitrio.messages.agent import THINKING_LEVELS
from pitrio.transports.print_mode import build_prompts, run_print_mode


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pitrio``."""
    parser = argparse.ArgumentParser(
        prog="pitrio", description="Run pi-compatible agent sessions on trio."
    )
    parser.add_argument("messages", nargs="*", help="prompts, run one after another")
    parser.add_argument("-p", "--print", action="store_true", help="print mode: final reply only")
    parser.add_argument("--mode", default="text", help="text (default) or json")
    parser.add_argument("--provider", help="provider of --model when it has no provider/ prefix")
    parser.add_argument("--model", help="model as provider/id (default faux/echo)")
    parser.add_argument("--thinking", choices=THINKING_LEVELS, help="thinking level")
    parser.add_argument("--no-session", action="store_true", help="do not write a session file")
    parser.add_argument("--session-dir", help="directory for session files")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pitrio`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sessions"]:
        from pitrio.transports.sessions_cli import run_sessions_command

        return run_sessions_command(argv[1:])
    args = build_parser().parse_args(argv)
    if args.list_models is not None:
        from pitrio.transports.models_cli import list_models_command

        return list_models_command(args.list_models or None)
    if args.mode == "rpc":
        sys.stderr.write("Error: --mode rpc is not available in this version\n")
        return 1
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
        )
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
