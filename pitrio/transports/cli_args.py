"""The arguments of ``pitrio`` (print, JSON and RPC modes): the parser, and the checks that
turn a command line pi would run in some half-meant way into a one-line error.

pi 0.73.1 runs ``--mode bogus`` as text mode, lets ``--tools`` override ``--no-tools`` and
``--mode rpc`` override ``-p``, and ignores prompts given to RPC mode; pitrio refuses those
(README, "The command line"). Every error is one line naming the argument, with the nearest
valid value when there is one (:func:`nearest`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

import attrs

from pitrio.messages.agent import THINKING_LEVELS
from pitrio.sdk.mcp import McpConfigFlag

PI_VERSION = "1.6.0"
"""The pi release whose command line, RPC protocol and session files pitrio follows."""

MODES = ("text", "json", "rpc")
CLI_THINKING_LEVELS: tuple[str, ...] = (
    THINKING_LEVELS if "max" in THINKING_LEVELS else (*THINKING_LEVELS, "max")
)
"""``--thinking`` values: pi 1.6.0's, ``max`` included."""


def session_thinking_level(level: str | None) -> str | None:
    """The level a session is asked for: ``max`` where the session knows it, else the
    highest level it knows (clamped to the model as ``max`` is: the model's highest)."""
    if level == "max" and "max" not in THINKING_LEVELS:
        return THINKING_LEVELS[-1]
    return level


@attrs.frozen
class Subcommand:
    """A word that, first on the command line, runs a command instead of a prompt."""

    name: str
    summary: str


SUBCOMMANDS = (
    Subcommand("serve", "run the daemon: sessions over websockets, with a web page"),
    Subcommand("attach", "chat in the terminal with a session of a running daemon"),
    Subcommand("acp", "serve editors over the Agent Client Protocol on stdin/stdout"),
    Subcommand("sessions", "list, check, repair, export or import session files"),
    Subcommand("trace", "summarise, draw or replay a trace recorded with --trace"),
    Subcommand("explore", "run a scenario under seeded task schedules and check invariants"),
    Subcommand("auth", "log in or out, print a provider's key or token, check it (as pi auth)"),
    Subcommand("login", "the same as pitrio auth login"),
    Subcommand("mcp", "add, remove or check the MCP servers of mcp.json (as pi mcp)"),
    Subcommand("install", "install a pi package and add it to settings (as pi install)"),
    Subcommand("remove", "remove a pi package and its settings entry (as pi remove)"),
    Subcommand("uninstall", "the same as pitrio remove"),
    Subcommand("list", "list the pi packages of the user's and the project's settings"),
    Subcommand("update", "update installed pi packages (as pi update --extensions)"),
    Subcommand("config", "pi's package resource screen (not available yet)"),
    Subcommand("db", "migrate the PostgreSQL session database, or show its schema version"),
    Subcommand("completion", "print the bash or zsh completion script"),
)


class UsageError(Exception):
    """A command line that cannot run: the one-line text says which argument and why."""


def version_text() -> str:
    """``pitrio X.Y.Z (compatible with pi 1.6.0)``."""
    from importlib import metadata  # ~10 ms (far more under load): only for --version

    try:
        version = metadata.version("pitrio")
    except metadata.PackageNotFoundError:  # a checkout used without installing it
        version = "unknown"
    return f"pitrio {version} (compatible with pi {PI_VERSION})"


def edit_distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn ``a`` into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, char_b in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1]


def nearest(word: str, candidates: Iterable[str], *, max_edits: int | None = None) -> str | None:
    """The candidate fewest edits from ``word`` (a swap of two letters is one edit; ties go
    to the one of the same length, then to difflib's likeness), within ``max_edits``
    (default: a third of the word, at least 1), or ``None``."""
    import difflib  # only on an error's path

    limit = max(1, len(word) // 3) if max_edits is None else max_edits
    scored = []
    for candidate in dict.fromkeys(candidates):
        distance = edit_distance(word.lower(), candidate.lower())
        if distance <= limit:
            likeness = difflib.SequenceMatcher(None, word, candidate).ratio()
            scored.append((distance, abs(len(word) - len(candidate)), -likeness, candidate))
    return min(scored)[3] if scored else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the nearest candidate, or ``""``."""
    match = nearest(word, candidates)
    return f"; did you mean {match}?" if match else ""


def choice(values: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type`` accepting one of ``values``; the error suggests the nearest."""

    def check(value: str) -> str:
        if value in values:
            return value
        hint = did_you_mean(value, values) or ""
        raise argparse.ArgumentTypeError(
            f"invalid value {value!r} (choose from {', '.join(values)}){hint}"
        )

    check.__name__ = "value"  # argparse names the type in some messages
    return check


class OneLineParser(argparse.ArgumentParser):
    """Errors are one line on stderr and exit code 1 (pi's), not argparse's usage and 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def _get_option_tuples(self, option_string: str) -> list[Any]:
        # No abbreviations at all, short ones included (argparse still takes "-x" for "-xt"
        # with allow_abbrev=False): pi matches options exactly.
        return []


def _epilog() -> str:
    width = max(len(command.name) for command in SUBCOMMANDS)
    lines = ["commands (pitrio COMMAND --help for theirs):"]
    lines += [f"  {c.name.ljust(width)}  {c.summary}" for c in SUBCOMMANDS]
    lines += [
        "",
        "Any other first word is a prompt, as in pi. Flags an extension declares",
        "(--name or --name=value) are passed to it.",
    ]
    return "\n".join(lines)


def build_parser(*, prompts: bool = True) -> argparse.ArgumentParser:
    """The argument parser of ``pitrio`` (without a subcommand); ``prompts=False`` leaves out
    the prompt words (the completion script offers the subcommands there instead)."""
    parser = OneLineParser(
        prog="pitrio",
        usage="pitrio [options] [prompt ...]\n       pitrio COMMAND ...",
        description="Run pi-compatible agent sessions on trio.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # as pi: --mod is no --model
    )
    if prompts:
        parser.add_argument("messages", nargs="*", help="prompts, run one after another")
    parser.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    parser.add_argument("-p", "--print", action="store_true", help="print mode: final reply only")
    parser.add_argument(
        "--mode",
        type=choice(MODES),
        choices=MODES,  # checked by the type first (its error suggests); shtab completes them
        metavar="MODE",
        default="text",
        help="text (default), json or rpc",
    )
    parser.add_argument("--provider", help="provider of --model when it has no provider/ prefix")
    parser.add_argument("--model", help="model as provider/id[:thinking] (default faux/echo)")
    parser.add_argument(
        "--api-key", metavar="KEY", help="API key of the model's provider (needs --model)"
    )
    parser.add_argument(
        "--thinking",
        type=choice(CLI_THINKING_LEVELS),
        choices=CLI_THINKING_LEVELS,
        metavar="LEVEL",
        help=", ".join(CLI_THINKING_LEVELS),
    )
    parser.add_argument(
        "--system-prompt", metavar="TEXT", help="replace the system prompt (text or a file)"
    )
    parser.add_argument(
        "--append-system-prompt",
        action="append",
        default=[],
        metavar="TEXT",
        help="append to the system prompt (text or a file); repeatable",
    )
    parser.add_argument("--no-session", action="store_true", help="do not write a session file")
    parser.add_argument("--session-dir", help="directory for session files")
    parser.add_argument(
        "--session-id",
        metavar="ID",
        help="open this directory's session with this id, or start one with it",
    )
    parser.add_argument("-n", "--name", metavar="NAME", help="the session's display name")
    opened = parser.add_mutually_exclusive_group()
    opened.add_argument("--session", help="open a session file (a path, or a session id prefix)")
    opened.add_argument(
        "-r",
        "--resume",
        action="store_true",
        help="pick a session of this directory to resume (the terminal chat)",
    )
    opened.add_argument(
        "-c",
        "--continue",
        dest="continue_recent",
        action="store_true",
        help="continue the most recent session of this directory",
    )
    opened.add_argument("--fork", help="start a new session forked from a session (path or id)")
    parser.add_argument(
        "--models", help="comma-separated model patterns that cycle_model walks (RPC mode)"
    )
    tools = parser.add_mutually_exclusive_group()
    tools.add_argument(
        "-t",
        "--tools",
        help="tools to activate: names or * patterns, or only +name/-name edits of the defaults",
    )
    tools.add_argument("-nt", "--no-tools", action="store_true", help="activate no tools")
    parser.add_argument(
        "-xt",
        "--exclude-tools",
        metavar="LIST",
        help="tools to disable (names or * patterns), MCP tools included",
    )
    parser.add_argument(
        "-nbt",
        "--no-builtin-tools",
        action="store_true",
        help="no built-in tool active at start (extension and MCP tools stay)",
    )
    parser.add_argument(
        "--skill", action="append", default=[], metavar="PATH", help="load a skill; repeatable"
    )
    parser.add_argument(
        "-ns", "--no-skills", action="store_true", help="do not discover skills (--skill ones load)"
    )
    parser.add_argument(
        "--prompt-template",
        action="append",
        default=[],
        metavar="PATH",
        help="load a prompt template; repeatable",
    )
    parser.add_argument(
        "-np",
        "--no-prompt-templates",
        action="store_true",
        help="do not discover prompt templates",
    )
    parser.add_argument(
        "-nc",
        "--no-context-files",
        action="store_true",
        help="do not load AGENTS.md / CLAUDE.md context files",
    )
    trust = parser.add_mutually_exclusive_group()
    trust.add_argument(
        "-a", "--approve", action="store_true", help="trust this project's local files"
    )
    trust.add_argument(
        "-na", "--no-approve", action="store_true", help="do not trust this project's files"
    )
    parser.add_argument(
        "-e",
        "--extension",
        action="append",
        default=[],
        metavar="PATH",
        help="load a Python extension (a file or package with setup(api)); repeatable",
    )
    parser.add_argument(
        "-ne",
        "--no-extensions",
        action="store_true",
        help="do not discover extensions (only -e ones load)",
    )
    parser.add_argument(
        "--mcp-config",
        action=McpConfigFlag,
        metavar="FILE",
        help="MCP servers (a JSON file with mcpServers); repeatable",
    )
    parser.add_argument("--no-mcp", action="store_true", help="start no MCP server")
    parser.add_argument("--offline", action="store_true", help="no start-up network access")
    parser.add_argument(
        "--verbose", action="store_true", help="accepted for pi's command lines (no effect)"
    )
    parser.add_argument(
        "--export",
        nargs="+",
        metavar="FILE [OUTPUT]",
        help="write the session file FILE as an HTML page (to OUTPUT, or a name derived from "
        "FILE's) and exit",
    )
    # pi's themes and full-screen mode belong to its own terminal UI; pitrio takes the flags so
    # a pi command line runs unchanged, and its terminal keeps its plain look.
    parser.add_argument(
        "--theme", action="append", metavar="PATH", help="accepted for pi's command lines"
    )
    parser.add_argument("--use-theme", metavar="NAME", help="accepted for pi's command lines")
    parser.add_argument("--no-themes", action="store_true", help="accepted for pi's command lines")
    parser.add_argument(
        "--tui-mode",
        choices=("fullscreen", "regular"),
        help="accepted for pi's command lines (fullscreen or regular)",
    )
    parser.add_argument(
        "--faux-chunk-delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="pause before each streamed chunk of the faux/* models' replies (0.05: 20 chunks "
        "a second, to watch a reply stream in --mode json)",
    )
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
    parser.add_argument(
        "--all",
        action="store_true",
        help="with --list-models: every model of the catalogue, credentials or not",
    )
    return parser


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option the parser knows (``-p``, ``--print``, ...)."""
    return [name for action in parser._actions for name in action.option_strings]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check ``argv``; raises :class:`UsageError` with the one-line reason.

    Long options the parser does not know are left for extensions (``extension_args``), unless
    one is a near miss of a built-in option: ``--modle`` is a typo, not an extension's flag.
    """
    parser = build_parser()
    args, extras = parser.parse_known_intermixed_args(list(argv))
    known = option_strings(parser)
    passed: list[str] = []
    for extra in extras:
        if extra.startswith("--") and len(extra) > 2:
            name = extra.partition("=")[0]
            close = nearest(name, known, max_edits=2 if len(name) >= 7 else 1)
            if close is not None:
                raise UsageError(f"unknown option {name}; did you mean {close}?")
            passed.append(extra)
        elif extra.startswith("-") and len(extra) > 1:
            hint = did_you_mean(extra, known) if len(extra) > 2 else ""  # -x: any is as near
            raise UsageError(f"unknown option {extra}{hint}")
        else:
            raise UsageError(f"unexpected argument {extra!r}")
    args.extension_args = tuple(passed)
    check(args)
    return args


RESUME_ELSEWHERE = (
    "-r/--resume opens pi's session picker, which only the terminal chat has (stdin and stdout "
    "a terminal, no -p or --mode): elsewhere list sessions with pitrio sessions list, then use "
    "--session ID (or -c)"
)


def check(args: argparse.Namespace) -> None:
    """The combinations pitrio refuses (pi silently lets one flag win or ignores one)."""
    if args.no_session:
        for flag, value in (
            ("--session", args.session),
            ("--continue", args.continue_recent),
            ("--fork", args.fork),
            ("--resume", args.resume),
        ):
            if value:
                raise UsageError(
                    f"--no-session cannot be used with {flag} (it opens or writes a session file)"
                )
    if args.mode == "rpc":
        if args.print:
            raise UsageError("-p/--print cannot be used with --mode rpc (choose one mode)")
        if args.messages and not any(m.startswith("@") for m in args.messages):
            raise UsageError(
                f"--mode rpc takes no prompt argument ({args.messages[0]!r}): "
                "send prompts as RPC commands on stdin"
            )
        if args.faux_chunk_delay is not None:
            raise UsageError("--faux-chunk-delay is for print and JSON modes (and pitrio serve)")
    if args.provider and not args.model:
        raise UsageError(
            "--provider requires --model (the model id within that provider, or provider/id)"
        )
    if args.api_key is not None and not args.model:
        raise UsageError(
            "--api-key requires a model to be specified via --model or --provider/--model"
        )
    if args.resume and (args.print or args.mode != "text"):
        raise UsageError(RESUME_ELSEWHERE)
    if args.session_id is not None:
        _check_session_id(args)
    if args.name is not None and not args.name.strip():
        raise UsageError("--name requires a non-empty value")
    if args.tools is not None:
        from pitrio.sdk.session import tool_list_error

        why = tool_list_error(split_list(args.tools))
        if why is not None:
            raise UsageError(f"--tools: {why}")
    if args.trace_payloads and not args.trace:
        raise UsageError("--trace-payloads needs --trace FILE")
    if args.all and args.list_models is None:
        raise UsageError("--all goes with --list-models")
    if args.faux_chunk_delay is not None and not args.faux_chunk_delay >= 0:
        raise UsageError(
            f"--faux-chunk-delay: {args.faux_chunk_delay} is not a delay (seconds >= 0)"
        )


def split_list(value: str | None) -> list[str]:
    """A comma-separated flag value's entries, trimmed, empty ones dropped (pi's)."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _check_session_id(args: argparse.Namespace) -> None:
    from pitrio.sdk.session import SESSION_ID

    for flag, value in (
        ("--session", args.session),
        ("--continue", args.continue_recent),
        ("--fork", args.fork),
        ("--resume", args.resume),
    ):
        if value:
            raise UsageError(f"--session-id cannot be combined with {flag}")
    if not SESSION_ID.match(args.session_id):
        raise UsageError(
            f"--session-id: invalid session id {args.session_id!r}: use letters, digits, "
            "'.', '_' and '-', starting and ending with a letter or digit"
        )


def subcommand_hint(messages: Sequence[str]) -> str | None:
    """A warning when the first prompt looks like a mistyped subcommand or ``version``.

    pi sends such a word to the model as a prompt, and so does pitrio; it says so on stderr,
    so ``pitrio version`` or ``pitrio serv`` are not sent silently.
    """
    if not messages or not messages[0] or " " in messages[0].strip():
        return None
    word = messages[0].strip()
    if word.lower() in ("version", "help"):
        flag = "--version" if word.lower() == "version" else "--help"
        return (
            f"Warning: {word!r} is sent to the model as a prompt (as pi does); {flag} is the flag"
        )
    close = nearest(word.lower(), [c.name for c in SUBCOMMANDS], max_edits=1)
    if close is not None:
        return f"Warning: {word!r} is sent to the model as a prompt; did you mean pitrio {close}?"
    return None


def print_help(stream: object = None) -> None:
    """The help text, on stdout unless ``stream`` is given."""
    build_parser().print_help(stream or sys.stdout)  # type: ignore[arg-type]


__all__ = [
    "MODES",
    "PI_VERSION",
    "SUBCOMMANDS",
    "OneLineParser",
    "Subcommand",
    "UsageError",
    "build_parser",
    "check",
    "choice",
    "did_you_mean",
    "edit_distance",
    "nearest",
    "parse",
    "print_help",
    "subcommand_hint",
    "version_text",
]
