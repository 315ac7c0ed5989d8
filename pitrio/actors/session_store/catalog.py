"""Finding sessions on disk: listing, ``--session`` resolution, ``--continue``, cross-project fork.

(spec §4.11, §4.12.) Blocking file I/O: call these through ``trio.to_thread``.

Listing reads each file line by line with plain JSON (no typed decoding) and is lenient, as
pi's is: lines that are not usable entries are skipped; a file whose first line is not a
valid header is not a session. ``pitrio sessions check`` is the strict view of one file.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import orjson

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.paths import agent_dir, session_dir, session_file_name
from pitrio.actors.session_store.storage import create_file
from pitrio.errors import SessionFileError, SessionNotFoundError
from pitrio.messages.codec import encode
from pitrio.messages.codec import loads as json_loads
from pitrio.messages.entries import CURRENT_SESSION_VERSION, SessionHeader, iso_now, new_session_id

HEADER_PROBE = 512
"""How many bytes of a file ``--continue`` reads to find its header (pi: 512)."""

NO_MESSAGES = "(no messages)"


@attrs.frozen(kw_only=True)
class SessionInfo:
    """pi's ``SessionInfo``: one session file as the session lists show it."""

    path: Path
    id: str
    cwd: str
    name: str | None
    parent_session_path: str | None
    created: datetime.datetime
    modified: datetime.datetime
    message_count: int
    first_message: str
    all_messages_text: str


def parse_time(value: Any) -> datetime.datetime | None:
    """An ISO timestamp (pi's ``...Z`` form included) as an aware datetime, else ``None``."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def time_from_ms(value: Any) -> datetime.datetime | None:
    """A message timestamp (unix milliseconds) as an aware datetime, else ``None``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def content_text(content: Any) -> str:
    """The text of message content: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return ""


def _valid_header(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "session"
        and isinstance(value.get("id"), str)
    )


def read_session_info(path: Path) -> SessionInfo | None:
    """The :class:`SessionInfo` of one file, or ``None`` if it is not a session file.

    ``messageCount`` counts ``message`` entries; ``firstMessage`` is the first user message's
    text; ``allMessagesText`` joins the text of every user and assistant message with spaces;
    ``modified`` is the latest user/assistant message time (its ``timestamp``, else its entry's),
    else the header time, else the file's mtime; the name is the latest ``session_info``.
    """
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError:
        return None
    with file:
        header: dict[str, Any] | None = None
        name: str | None = None
        count = 0
        first: str | None = None
        texts: list[str] = []
        latest: datetime.datetime | None = None
        for line in file:
            if not line.strip():
                continue
            try:
                value = json_loads(line)
            except orjson.JSONDecodeError:
                if header is None:
                    return None
                continue
            if header is None:
                if not _valid_header(value):
                    return None
                header = value
                continue
            if not isinstance(value, dict):
                continue
            kind = value.get("type")
            if kind == "session_info":
                raw_name = value.get("name")
                name = raw_name.strip() or None if isinstance(raw_name, str) else None
            elif kind == "message":
                message = value.get("message")
                if not isinstance(message, dict):
                    continue
                count += 1
                role = message.get("role")
                if role not in ("user", "assistant"):
                    continue
                text = content_text(message.get("content"))
                if role == "user" and first is None and text:
                    first = text
                if text:
                    texts.append(text)
                when = time_from_ms(message.get("timestamp")) or parse_time(value.get("timestamp"))
                if when is not None and (latest is None or when > latest):
                    latest = when
    if header is None:
        return None
    created = parse_time(header.get("timestamp"))
    mtime = datetime.datetime.fromtimestamp(path.stat().st_mtime, tz=datetime.UTC)
    parent = header.get("parentSession")
    cwd = header.get("cwd")
    return SessionInfo(
        path=path,
        id=header["id"],
        cwd=cwd if isinstance(cwd, str) else "",
        name=name,
        parent_session_path=parent if isinstance(parent, str) else None,
        created=created or mtime,
        modified=latest or created or mtime,
        message_count=count,
        first_message=first or NO_MESSAGES,
        all_messages_text=" ".join(texts),
    )


def _session_files(directory: Path) -> list[Path]:
    try:
        return [path for path in directory.iterdir() if path.name.endswith(".jsonl")]
    except OSError:
        return []


def _sorted(infos: Iterable[SessionInfo | None]) -> list[SessionInfo]:
    found = [info for info in infos if info is not None]
    found.sort(key=lambda info: info.modified, reverse=True)
    return found


def list_sessions(directory: Path) -> list[SessionInfo]:
    """pi's ``list``: the sessions of one session dir, most recently modified first."""
    return _sorted(read_session_info(path) for path in _session_files(directory))


def list_all_sessions(sessions_root: Path | None = None) -> list[SessionInfo]:
    """pi's ``listAll``: the sessions of every cwd under ``<agent dir>/sessions``."""
    root = sessions_root or agent_dir() / "sessions"
    try:
        directories = [path for path in root.iterdir() if path.is_dir()]
    except OSError:
        return []
    return _sorted(
        read_session_info(path) for directory in directories for path in _session_files(directory)
    )


def has_valid_header(path: Path) -> bool:
    """Whether the first line of a file (within its first 512 bytes) is a session header."""
    try:
        with open(path, "rb") as file:
            probe = file.read(HEADER_PROBE)
    except OSError:
        return False
    first = probe.split(b"\n", 1)[0]
    try:
        return _valid_header(json_loads(first))
    except orjson.JSONDecodeError:
        return False


def most_recent_session(directory: Path) -> Path | None:
    """``-c/--continue``: the session file with the newest mtime and a valid header, if any."""
    best: tuple[float, Path] | None = None
    for path in _session_files(directory):
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if (best is None or mtime > best[0]) and has_valid_header(path):
            best = (mtime, path)
    return None if best is None else best[1]


@attrs.frozen
class ResolvedSession:
    """Where a ``--session`` argument leads; ``other_project`` if found under another cwd."""

    path: Path
    info: SessionInfo | None = None
    other_project: bool = False


def resolve_session_arg(
    arg: str,
    *,
    cwd: str,
    directory: Path | None = None,
    sessions_root: Path | None = None,
) -> ResolvedSession:
    """pi's ``--session`` resolution.

    An argument containing ``/`` or ``\\`` or ending in ``.jsonl`` is a path (relative to
    ``cwd``). Otherwise it is a session-id prefix, looked up among the current project's
    sessions (``directory``, default the session dir of ``cwd``), then among all projects; the
    most recently modified match wins. Raises :class:`SessionNotFoundError`.
    """
    if "/" in arg or "\\" in arg or arg.endswith(".jsonl"):
        path = Path(arg).expanduser()
        return ResolvedSession(path if path.is_absolute() else Path(cwd) / path)
    here = directory or session_dir(cwd)
    for info in list_sessions(here):
        if info.id.startswith(arg):
            return ResolvedSession(info.path, info)
    for info in list_all_sessions(sessions_root):
        if info.id.startswith(arg):
            other = info.path.parent.resolve() != here.resolve()
            return ResolvedSession(info.path, info, other_project=other)
    raise SessionNotFoundError(f"No session found matching '{arg}'")


def fork_from(source: Path, target_cwd: str, *, directory: Path | None = None) -> Path:
    """pi's ``forkFrom``: copy a session into another project's session dir.

    The new file has a fresh header (``cwd`` = ``target_cwd``, ``parentSession`` = ``source``)
    followed by every entry of the source, byte for byte (after migrating an old file). It is
    written at once. Raises :class:`~pitrio.errors.SessionFileError` for an unusable source.
    """
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise SessionFileError(
            str(source), 0, f"Cannot fork: source session file is empty or invalid: {source}"
        ) from exc
    parsed = parse_session_bytes(data, origin=str(source))
    if parsed.empty:
        raise SessionFileError(
            str(source), 0, f"Cannot fork: source session file is empty or invalid: {source}"
        )
    if parsed.header is None:
        raise SessionFileError(
            str(source), 1, f"Cannot fork: source session has no header: {source}"
        )
    parsed.raise_for_errors()
    header = SessionHeader(
        version=CURRENT_SESSION_VERSION,
        id=new_session_id(),
        timestamp=iso_now(),
        cwd=target_cwd,
        parent_session=str(source),
    )
    target_dir = directory or session_dir(target_cwd)
    path = target_dir / session_file_name(header.timestamp, header.id)
    lines = [encode(header), *(stored.raw for stored in parsed.entries)]
    create_file(path, b"\n".join(lines) + b"\n")
    return path
