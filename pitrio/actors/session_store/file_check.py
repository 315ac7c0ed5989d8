"""``check`` and ``repair`` of a session file's bytes (pure; ``maintenance.py`` does the I/O).

:func:`check_session_bytes` lists every problem the parser (``file_format.py``) finds with
every entry decoded in full; :func:`plan_repair` splits the file into the lines that stay and
the bad ones ``repair`` moves aside to ``FILE.rejected``.
"""

from __future__ import annotations

import attrs

from pitrio.actors.session_store.file_format import Problem, parse_session_bytes
from pitrio.errors import SessionFileError

REJECTED_KINDS: frozenset[str] = frozenset(
    {"malformed", "torn", "duplicate_id", "undecodable", "parent_cycle"}
)
"""Problem kinds whose line ``repair`` moves to ``FILE.rejected``."""


def check_session_bytes(data: bytes, *, origin: str) -> list[Problem]:
    """Every problem of a session file, each entry decoded in full (``pitrio sessions check``)."""
    parsed = parse_session_bytes(data, origin=origin, decode_all=True)
    problems = list(parsed.problems)
    if parsed.empty:
        problems.insert(0, Problem(0, "no_header", "error", "empty file: no session header"))
    return problems


@attrs.frozen
class RepairPlan:
    """What ``repair`` writes: the kept file content and the lines moved aside."""

    kept: bytes
    rejected: tuple[tuple[int, bytes], ...]
    problems: tuple[Problem, ...]


def plan_repair(data: bytes, *, origin: str) -> RepairPlan:
    """Split a session file into what stays and the bad lines that move to ``FILE.rejected``.

    Torn and malformed lines move; every other line stays byte for byte, and a last line
    without a newline gets one. A file without a valid header cannot be repaired (raises
    :class:`~pitrio.errors.SessionFileError`): there is no session to keep the lines in.
    """
    problems = check_session_bytes(data, origin=origin)
    for problem in problems:
        if problem.kind == "no_header":
            raise SessionFileError(origin, problem.line, f"cannot repair: {problem.message}")
    bad = {problem.line for problem in problems if problem.kind in REJECTED_KINDS}
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    kept: list[bytes] = []
    rejected: list[tuple[int, bytes]] = []
    for number, piece in enumerate(pieces, start=1):
        if number in bad:
            rejected.append((number, piece))
        else:
            kept.append(piece + b"\n")
    return RepairPlan(b"".join(kept), tuple(rejected), tuple(problems))
