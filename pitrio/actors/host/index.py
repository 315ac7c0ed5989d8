"""Finding session files by id and describing them (blocking I/O: call through a thread).

The host knows sessions by id; files are named ``<timestamp>_<id>.jsonl`` under
``<agent dir>/sessions/<encoded cwd>/`` (or in one flat ``--session-dir``). A lookup tries the
file name first and confirms it with the header, then falls back to reading every header (a
file may have been renamed or written by another tool). Descriptions (pi's ``SessionInfo``)
are cached by path, size and modification time, so listing a thousand idle sessions twice reads
them once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import orjson

from pitrio.actors.session_store.catalog import HEADER_PROBE, SessionInfo, read_session_info
from pitrio.actors.session_store.jsonline import strip_bom
from pitrio.actors.session_store.paths import open_session_file
from pitrio.errors import SessionPathError


def header_id(path: Path) -> str | None:
    """The ``id`` of a file's session header, if its first line is one."""
    try:
        file = open_session_file(path)  # a FIFO or device named *.jsonl: not a session
        if file is None:
            return None
        with file:
            first = file.read(HEADER_PROBE).split(b"\n", 1)[0]
        value = orjson.loads(strip_bom(first))
    except (OSError, orjson.JSONDecodeError, SessionPathError):
        return None
    if isinstance(value, dict) and value.get("type") == "session":
        found = value.get("id")
        return found if isinstance(found, str) else None
    return None


class SessionIndex:
    """The session files under a sessions root (one level of cwd dirs) and flat dirs."""

    def __init__(self, sessions_root: Path | None, flat_dirs: Sequence[Path] = ()) -> None:
        self.sessions_root = sessions_root
        self.flat_dirs = tuple(flat_dirs)
        self._infos: dict[Path, tuple[tuple[int, int], SessionInfo | None]] = {}

    def directories(self) -> Iterator[Path]:
        """Every directory that may hold session files."""
        if self.sessions_root is not None:
            with contextlib.suppress(OSError):
                yield from sorted(p for p in self.sessions_root.iterdir() if p.is_dir())
        yield from self.flat_dirs

    def files(self) -> list[Path]:
        """Every ``*.jsonl`` file of those directories."""
        found: list[Path] = []
        for directory in self.directories():
            with contextlib.suppress(OSError):
                found.extend(p for p in directory.iterdir() if p.name.endswith(".jsonl"))
        return found

    def find(self, session_id: str) -> Path | None:
        """The file of session ``session_id`` (``session_id`` must be validated already)."""
        suffix = f"_{session_id}.jsonl"
        files = self.files()
        for path in files:
            if path.name.endswith(suffix) and header_id(path) == session_id:
                return path
        for path in files:
            if not path.name.endswith(suffix) and header_id(path) == session_id:
                return path
        return None

    def info(self, path: Path) -> SessionInfo | None:
        """pi's ``SessionInfo`` of one file (cached while the file is unchanged)."""
        try:
            stat = path.stat()
        except OSError:
            self._infos.pop(path, None)
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._infos.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        info = read_session_info(path)
        self._infos[path] = (key, info)
        return info

    def all_infos(self) -> list[SessionInfo]:
        """Every session file's description (files that are not sessions left out)."""
        files = self.files()
        alive = set(files)
        for gone in [p for p in self._infos if p not in alive]:
            del self._infos[gone]
        return [info for path in files if (info := self.info(path)) is not None]

    def forget(self, path: Path) -> None:
        """Drop a cached description (the file was deleted)."""
        self._infos.pop(path, None)
