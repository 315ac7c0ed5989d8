"""The ``pitrio`` command line: the terminal chat (a terminal on stdin and stdout), print mode
(``-p``, or stdin or stdout redirected), JSON mode (``--mode json``) and RPC mode
(``--mode rpc``)."""

from __future__ import annotations

# First: the SDK's modules load under the attrs method cache, the collector off (start-up).
from pitrio.sdk import agent as _sdk  # noqa: F401  # isort: skip

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio import _attrs_cache, telemetry
from pitrio.transports.cli_args import (
    RESUME_ELSEWHERE,
    UsageError,
    parse,
    print_help,
    session_thinking_level,
    split_list,
    subcommand_hint,
    version_text,
)
from pitrio.transports.interrupt import default_sigint, exit_code
from pitrio.transports.print_mode import build_prompts, run_print_mode

if TYPE_CHECKING:
    from pitrio import FauxProvider, SessionOptions

SUBCOMMAND_ENTRIES = {
    "sessions": ("pitrio.transports.sessions_cli", "run_sessions_command"),
    "db": ("pitrio.transports.db_cli", "run_db_command"),
    "serve": ("pitrio.transports.serve_entry", "serve_main"),
    "trace": ("pitrio.transports.trace_cli", "run_trace_command"),
    "explore": ("pitrio.transports.explore_cli", "run_explore_command"),
    "attach": ("pitrio.transports.attach", "attach_main"),
    "login": ("pitrio.transports.login_cli", "login_main"),
    "auth": ("pitrio.transports.auth_cli", "auth_main"),
    "completion": ("pitrio.transports.cli_completion", "completion_main"),
    "mcp": ("pitrio.transports.mcp_cli", "run_mcp_command"),
    "acp": ("pitrio.transports.acp.cli", "acp_main"),
    **{
        word: ("pitrio.transports.packages_cli", f"{word}_main")
        for word in ("install", "remove", "uninstall", "update", "list", "config")
    },
}
"""Each subcommand's module and entry point (imported when used: start-up stays light)."""


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


def _active_tools(args: argparse.Namespace) -> list[str] | None:
    """``--no-tools``: no tool active (``None``: the selection of :func:`_flag_options`)."""
    return [] if args.no_tools else None


def _flag_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~pitrio.SessionOptions` fields of pi 1.6.0's session flags."""
    return {
        "tool_patterns": None if args.tools is None else tuple(split_list(args.tools)),
        "exclude_tools": tuple(split_list(args.exclude_tools)),
        "no_builtin_tools": args.no_builtin_tools,
        "no_mcp": args.no_mcp,
        "session_id": args.session_id,
        "session_name": None if args.name is None else args.name.strip(),
        "api_key": args.api_key,
        "system_prompt": args.system_prompt,
        "append_system_prompt": tuple(args.append_system_prompt),
        "skill_paths": tuple(args.skill),
        "no_skills": args.no_skills,
        "prompt_template_paths": tuple(args.prompt_template),
        "no_prompt_templates": args.no_prompt_templates,
        "no_context_files": args.no_context_files,
        "project_trust": True if args.approve else False if args.no_approve else None,
        "project_trust_rules": True,  # pi 1.6.0's trust.json / defaultProjectTrust rules
    }


def _session_options(args: argparse.Namespace) -> SessionOptions:
    """The session of ``--mode rpc`` and of the terminal chat: every session flag."""
    from pitrio import SessionOptions

    return SessionOptions(
        model=_model_ref(args.provider, args.model),
        thinking_level=session_thinking_level(args.thinking),
        session=args.session,
        continue_recent=args.continue_recent,
        fork=args.fork,
        persist=not args.no_session,
        session_dir=args.session_dir,
        active_tools=_active_tools(args),
        extensions=tuple(args.extension),
        no_extensions=args.no_extensions,
        extension_args=args.extension_args,
        ui_clients=True,
        sync_inline=True,  # one session per process: no worker-thread hop per append
        **_flag_options(args),
    )


def session_options_of(args: argparse.Namespace) -> tuple[SessionOptions, FauxProvider | None]:
    """The session options of the session flags (``pitrio acp`` starts its sessions so), and
    the faux model ``--faux-chunk-delay`` asks for."""
    return _session_options(args), _faux(args.faux_chunk_delay)


def _rpc_mode(args: argparse.Namespace) -> int:
    """``--mode rpc``: the options of the session, then serve stdin/stdout until EOF."""
    with _attrs_cache.caching():  # the server's modules and their classes: first use
        from pitrio.transports.rpc.process import run_rpc

    if any(message.startswith("@") for message in args.messages):
        sys.stderr.write("Error: @file arguments are not supported in RPC mode\n")
        return 1
    warnings: list[str] = []
    return run_rpc(
        _session_options(args), model_patterns=_split_names(args.models), warnings=warnings
    )


def _wants_chat(args: argparse.Namespace) -> bool:
    """pi's rule: with a terminal on stdin and stdout the terminal UI opens, unless ``-p`` or
    ``--mode json|rpc`` chose another interface (prompts given become its first ones)."""
    if args.print or args.mode != "text":
        return False
    return _is_tty(sys.stdin) and _is_tty(sys.stdout)


def _is_tty(stream: Any) -> bool:
    return stream is not None and bool(stream.isatty())


def _chat_mode(args: argparse.Namespace, attached: Any = None) -> int:
    """The terminal chat (:mod:`pitrio.transports.chat`) on the session of the flags;
    ``attached``: the ``@file`` arguments read (``FileArguments``), if any."""
    from pitrio.messages.codec import to_json
    from pitrio.transports.chat import chat_main

    return chat_main(
        attrs.evolve(_session_options(args), mode="tui"),  # the extensions' ctx.mode
        build_prompts(args.messages, None, attached.text if attached else ""),
        faux=_faux(args.faux_chunk_delay),
        model_patterns=_split_names(args.models),
        resume=args.resume,
        images=[to_json(image) for image in attached.images] if attached else (),
    )


def _subcommand(name: str) -> Callable[[list[str]], int]:
    module, function = SUBCOMMAND_ENTRIES[name]
    entry: Callable[[list[str]], int] = getattr(importlib.import_module(module), function)
    return entry


def _usage_error(message: str) -> int:
    sys.stderr.write(f"Error: {message}\n")
    return 1


def _export(values: list[str]) -> int:
    """``--export FILE [OUTPUT]``: the page is written and the command ends (later words, as
    in pi, are not run as prompts)."""
    from pitrio.errors import PitrioError
    from pitrio.sdk.store import export_file_html

    try:
        written = export_file_html(values[0], values[1] if len(values) > 1 else None)
    except PitrioError as exc:
        return _usage_error(str(exc))
    print(f"Exported to: {written}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pitrio`` console script; returns the exit code.

    Output into a closed pipe (``pitrio --list-models --all | head``) ends the command
    quietly with status 0, whichever subcommand or mode was writing.
    """
    from pitrio.transports.cli_pipe import quiet_exit_on_closed_output

    mark_process()
    return quiet_exit_on_closed_output(lambda: _main(argv))


PROCESS_MARKERS = {"PI_CODING_AGENT": "true", "AI_AGENT": "pi"}
"""pi 1.6.0's process markers (``docs/environment-variables.md``), set by its command line and
RPC entry points, not by its SDK: every child process (bash commands, user ``!`` commands, MCP
servers, extensions' processes) inherits them. pitrio runs pi's sessions for pi's tooling,
so it marks its processes with pi's values."""


def mark_process() -> None:
    """Set :data:`PROCESS_MARKERS` in this process's environment (the command line's only)."""
    os.environ.update(PROCESS_MARKERS)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if telemetry.wanted_here():  # OTEL_* ask for OpenTelemetry: the same command, exported
        return telemetry.run_main(main, argv)
    if argv and argv[0] in SUBCOMMAND_ENTRIES:
        return _subcommand(argv[0])(argv[1:])
    if not argv and _is_tty(sys.stdin) and not _is_tty(sys.stdout):
        # Typed at a terminal, read elsewhere (``pitrio | less``): the help, not a chat
        # nobody sees nor print mode's "no prompt" error.
        print_help()
        return 0
    try:
        args = parse(argv)
    except UsageError as exc:
        return _usage_error(str(exc))
    if args.version:
        print(version_text())
        return 0
    if args.trace is not None:  # the same command line, every session recorded
        from pitrio.transports.trace_cli import recording_sessions, without_trace_flags

        with recording_sessions(args.trace, payloads=args.trace_payloads):
            return main(without_trace_flags(argv))
    if args.export is not None:
        return _export(args.export)
    if args.list_models is not None:
        from pitrio.transports.models_cli import list_models_command

        return list_models_command(args.list_models or None, every=args.all)
    attached: Any = None
    if any(word.startswith("@") for word in args.messages):
        attached = _file_arguments(args)
        if isinstance(attached, int):
            return attached
    default_sigint()  # no KeyboardInterrupt: SIGINT kills, or ends the session cleanly
    if args.mode == "rpc":
        return exit_code(_rpc_mode(args))
    if _wants_chat(args):
        return exit_code(_chat_mode(args, attached))
    if args.resume:  # stdin or stdout redirected: print mode, which has no picker
        return _usage_error(RESUME_ELSEWHERE)
    json_mode = args.mode == "json"
    prompts = build_prompts(args.messages, _read_stdin(), attached.text if attached else "")
    if not prompts and not json_mode:
        # pi exits 0 having done nothing; a clear error says why nothing happened. JSON mode
        # keeps pi's answer (the session header alone), which scripts may rely on.
        return _usage_error(
            "no prompt: give one as an argument or pipe it on stdin (see pitrio --help)"
        )
    hint = subcommand_hint(args.messages)
    if hint is not None:
        sys.stderr.write(hint + "\n")
    code = trio.run(
        lambda: run_print_mode(
            prompts,
            json_mode=json_mode,
            model=_model_ref(args.provider, args.model),
            persist=not args.no_session,
            session_dir=args.session_dir,
            thinking_level=session_thinking_level(args.thinking),
            faux=_faux(args.faux_chunk_delay),
            session_options={
                "session": args.session,
                "continue_recent": args.continue_recent,
                "fork": args.fork,
                "extensions": tuple(args.extension),
                "no_extensions": args.no_extensions,
                "extension_args": args.extension_args,
                "active_tools": _active_tools(args),
                **_flag_options(args),
            },
            sigint=True,
            images=attached.images if attached else (),
        )
    )
    return exit_code(code)


def _file_arguments(args: argparse.Namespace) -> Any:
    """The ``@file`` words taken out of ``args.messages`` and read (``FileArguments``), or
    the exit code of pi's error line."""
    from pitrio.transports.cli_files import (
        RPC_REFUSAL,
        FileArgumentError,
        read_file_arguments,
        split_file_arguments,
    )

    files, args.messages = split_file_arguments(args.messages)
    if args.mode == "rpc":
        return _usage_error(RPC_REFUSAL)
    try:
        return read_file_arguments(files)
    except FileArgumentError as exc:
        return _usage_error(str(exc))


def _faux(delay: float | None) -> FauxProvider | None:
    """The faux provider for ``--faux-chunk-delay`` (``None``: the default one)."""
    import pitrio

    if delay is None:
        return pitrio.default_faux()
    faux = pitrio.default_faux() or pitrio.FauxProvider()
    faux.chunk_delay = delay
    return faux


if __name__ == "__main__":
    sys.exit(main())
