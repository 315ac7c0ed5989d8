"""``pitrio db ...`` and moving sessions between session files and PostgreSQL.

* ``pitrio db migrate [--store URL]``: bring the database's schema to this version (prints
  each migration applied; nothing when it is current).
* ``pitrio db status [--store URL]``: the schema version and the number of sessions.
* ``pitrio sessions export SESSION --jsonl [--store URL] [-o FILE]``: a session as pi's JSONL
  file (from the database with ``--store``, else the session file found by path or id prefix),
  on stdout or into ``FILE``; byte for byte what was written, so pi opens it.
* ``pitrio sessions import FILE [--store URL]``: a pi JSONL file into the database (with
  ``--store``), else into the session dir of its cwd, as a session file.

``URL`` defaults to the ``session.store`` setting of the agent dir's ``settings.json``. Exit
codes: 0 done, 1 refused (unknown session, id taken, unreachable database), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import trio

from pitrio.errors import PitrioError
from pitrio.sdk.store import (
    agent_dir,
    parse_session_bytes,
    resolve_session_arg,
    session_dir,
    session_file_name,
)

T = TypeVar("T")


def store_url(flag: str | None) -> str | None:
    """``--store``, else the ``session.store`` setting, else ``None``."""
    from pitrio.sdk.store import configured_store

    return configured_store(agent_dir(), flag)


def _with_database(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(database)`` on an open :class:`~.database.Database` (no schema check)."""
    from pitrio.sdk.postgres import Database

    async def main() -> T:
        database = Database(url)
        await database.open()
        try:
            return await work(database)
        finally:
            await database.close()

    return trio.run(main)


def _require_url(flag: str | None) -> str:
    url = store_url(flag)
    if not url:
        raise PitrioError("no database: give --store postgresql://... or set session.store")
    from pitrio.transports.cli_hints import require_postgres

    require_postgres()
    from pitrio.sdk.postgres import is_postgres_url

    if not is_postgres_url(url):
        raise PitrioError(f"not a postgresql:// URL: {url}")
    return url


# -- pitrio db ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pitrio db``."""
    parser = argparse.ArgumentParser(prog="pitrio db", description="Manage the session database.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("migrate", "apply the schema migrations"), ("status", "schema version")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--store", metavar="URL", help="postgresql://... database")
    return parser


def _migrate(url: str, out: TextIO) -> int:
    async def work(database: Any) -> list[Any]:
        applied: list[Any] = await database.migrate()
        return applied

    applied = _with_database(url, work)
    for migration in applied:
        out.write(f"applied migration {migration.version}: {migration.name}\n")
    if not applied:
        out.write("the schema is up to date\n")
    return 0


def _status(url: str, out: TextIO) -> int:
    async def work(database: Any) -> tuple[int, int]:
        version: int = await database.schema_version()
        if version == 0:
            return 0, 0
        count = await database.run(
            lambda conn: conn.execute("SELECT count(*) FROM pitrio_sessions").fetchone()[0]
        )
        return version, int(count)

    from pitrio.sdk.postgres import SCHEMA_VERSION

    version, sessions = _with_database(url, work)
    out.write(f"schema version {version} (this pitrio: {SCHEMA_VERSION}), {sessions} session(s)\n")
    return 0 if version == SCHEMA_VERSION else 1


def run_db_command(argv: list[str]) -> int:
    """Run ``pitrio db <argv...>``; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return 2 if exit_.code else 0
    try:
        url = _require_url(args.store)
        if args.command == "migrate":
            return _migrate(url, sys.stdout)
        return _status(url, sys.stdout)
    except PitrioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1


# -- export and import (``pitrio sessions export|import``) -------------------------------------


def add_transfer_commands(commands: Any) -> None:
    """Add ``export`` and ``import`` to the ``pitrio sessions`` sub-commands."""
    export = commands.add_parser("export", help="write a session as pi's JSONL file")
    export.add_argument("session", help="session id (or, without --store, a path or id prefix)")
    export.add_argument("--jsonl", action="store_true", help="pi's JSONL format (the only one)")
    export.add_argument("--store", metavar="URL", help="read it from this postgresql:// database")
    export.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    imported = commands.add_parser("import", help="store a pi JSONL session file")
    imported.add_argument("file", type=Path)
    imported.add_argument("--store", metavar="URL", help="into this postgresql:// database")


def export_command(args: argparse.Namespace, out: TextIO) -> int:
    """``pitrio sessions export``: see the module doc."""
    url = store_url(args.store)
    if url:
        url = _require_url(url)

        async def work(database: Any) -> bytes:
            from pitrio.sdk.postgres import export_session

            data: bytes = await database.run(lambda conn: export_session(conn, args.session))
            return data

        data = _with_database(url, work)
    else:
        path = resolve_session_arg(args.session, cwd=os.getcwd()).path
        data = path.read_bytes()
    if args.output is not None:
        args.output.write_bytes(data)
    else:
        out.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 0


def import_command(args: argparse.Namespace, out: TextIO) -> int:
    """``pitrio sessions import``: see the module doc."""
    data = args.file.read_bytes()
    url = store_url(args.store)
    if url:
        url = _require_url(url)

        async def work(database: Any) -> str:
            from pitrio.sdk.postgres import import_session

            await database.require_schema()
            session_id: str = await database.run(
                lambda conn: import_session(conn, data, origin=str(args.file))
            )
            return session_id

        session_id = _with_database(url, work)
        out.write(f"{session_id}\n")
        return 0
    parsed = parse_session_bytes(data, origin=str(args.file))
    parsed.raise_for_errors()
    if parsed.header is None:
        raise PitrioError(f"{args.file}: no session header")
    header = parsed.header
    target = session_dir(header.cwd) / session_file_name(header.timestamp, header.id)
    if target.exists():
        raise PitrioError(f"{target}: the session is already there")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    out.write(f"{target}\n")
    return 0
