"""``pitrio sessions ...``: look after session files from the command line.

* ``pitrio sessions check FILE``: list every problem of the file, one per line
  (``FILE:LINE: error|warning: message``). Exit 0 if there is none, 1 if there are.
* ``pitrio sessions repair FILE``: move torn and malformed lines to ``FILE.rejected`` and keep
  everything else; refuses while another process writes the session. Exit 0 when the file is
  usable afterwards, 1 when it cannot be repaired.
* ``pitrio sessions list [--all] [--cwd DIR] [--session-dir DIR] [--json]``: the sessions of a
  project (default: the current directory's), or of every project, newest first.

Exit code 2 means the command line or the file itself could not be used.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import orjson

from pitrio.errors import PitrioError, SessionError, SessionPathError
from pitrio.sdk.store import (
    SessionInfo,
    agent_dir,
    check_file,
    list_all_sessions,
    list_sessions,
    repair_file,
    session_dir,
)
from pitrio.transports.db_cli import add_transfer_commands, export_command, import_command


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pitrio sessions``."""
    parser = argparse.ArgumentParser(prog="pitrio sessions", description="Manage session files.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="list every problem of a session file")
    check.add_argument("file", type=Path)
    repair = commands.add_parser("repair", help="move bad lines of a session file aside")
    repair.add_argument("file", type=Path)
    listing = commands.add_parser("list", help="list sessions, newest first")
    listing.add_argument("--all", action="store_true", help="sessions of every project")
    listing.add_argument("--cwd", help="the project directory (default: the current one)")
    listing.add_argument("--session-dir", help="directory holding the session files")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    add_transfer_commands(commands)  # export --jsonl / import (files and PostgreSQL)
    return parser


def _check(file: Path, out: TextIO) -> int:
    problems = check_file(file)
    for problem in problems:
        out.write(problem.describe(str(file)) + "\n")
    if not problems:
        out.write(f"{file}: ok\n")
        return 0
    errors = sum(1 for problem in problems if problem.severity == "error")
    out.write(f"{file}: {errors} error(s), {len(problems) - errors} warning(s)\n")
    return 1


def _repair(file: Path, out: TextIO) -> int:
    report = repair_file(file)
    reasons = {problem.line: problem.message for problem in report.problems}
    for number, _ in report.moved:
        out.write(f"{file}:{number}: moved to {report.rejected_path}: {reasons.get(number)}\n")
    if report.rewritten:
        out.write(f"{file}: repaired ({len(report.moved)} line(s) moved)\n")
    else:
        out.write(f"{file}: nothing to repair\n")
    return 0


def _info_json(info: SessionInfo) -> dict[str, Any]:
    return {
        "path": str(info.path),
        "id": info.id,
        "cwd": info.cwd,
        "name": info.name,
        "parentSessionPath": info.parent_session_path,
        "created": info.created.isoformat(),
        "modified": info.modified.isoformat(),
        "messageCount": info.message_count,
        "firstMessage": info.first_message,
    }


def _list(args: argparse.Namespace, out: TextIO) -> int:
    if args.all:
        infos = list_all_sessions(agent_dir() / "sessions")
    else:
        cwd = os.path.abspath(args.cwd or os.getcwd())
        infos = list_sessions(session_dir(cwd, override=args.session_dir))
    for info in infos:
        if args.json:
            out.write(orjson.dumps(_info_json(info)).decode() + "\n")
            continue
        title = info.name or info.first_message.replace("\n", " ")
        if len(title) > 60:
            title = title[:57] + "..."
        stamp = info.modified.strftime("%Y-%m-%d %H:%M")
        out.write(f"{stamp}  {info.id}  {info.message_count:5d}  {title}  {info.path}\n")
    return 0


def run_sessions_command(argv: list[str]) -> int:
    """Run ``pitrio sessions <argv...>``; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return 2 if exit_.code else 0
    out = sys.stdout
    try:
        if args.command == "check":
            return _check(args.file, out)
        if args.command == "repair":
            return _repair(args.file, out)
        if args.command == "export":
            return export_command(args, out)
        if args.command == "import":
            return import_command(args, out)
        return _list(args, out)
    except SessionPathError as exc:  # not a file at all: the file could not be used
        sys.stderr.write(f"Error: {exc}\n")
        return 2
    except (SessionError, PitrioError) as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 2
