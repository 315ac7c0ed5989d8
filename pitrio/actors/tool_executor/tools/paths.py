"""Path rules of the tools (spec §5.1): ``@`` prefix, Unicode spaces, ``~``, cwd-relative paths.

Pure string functions; where a rule needs to know whether a file exists (the fallbacks of
``read``), the caller passes the ``exists`` predicate, so tests need no filesystem.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable

from pitrio.messages.ostext import check_os_text

_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_AM_PM = re.compile(r" (AM|PM)\.", re.IGNORECASE)
_NARROW_NBSP = "\u202f"


def expand_path(path: str, home: str | None = None) -> str:
    """Drop one leading ``@``, turn Unicode spaces into ASCII ones, expand ``~`` and ``~/``."""
    if path.startswith("@"):
        path = path[1:]
    path = _UNICODE_SPACES.sub(" ", path)
    if path == "~" or path.startswith("~/"):
        home = home if home is not None else os.path.expanduser("~")
        return home + path[1:]
    return path


def resolve_to_cwd(path: str, cwd: str, home: str | None = None) -> str:
    """The absolute path a tool argument names: absolute paths as given, others under ``cwd``.

    Raises :class:`~pitrio.errors.UnencodableTextError` for a path no file system can take (a
    NUL or a lone surrogate in it): a tool's error result, not a failure deep in a syscall."""
    check_os_text(path, "path")
    expanded = expand_path(path, home)
    if os.path.isabs(expanded):
        return expanded
    return os.path.normpath(os.path.join(cwd, expanded))


def read_path_candidates(resolved: str) -> list[str]:
    """The spellings ``read`` tries, in order, when ``resolved`` does not exist.

    macOS screenshot names use a narrow no-break space before ``AM.``/``PM.``; macOS file
    systems return NFD names; typed apostrophes may be curly quotes in the real name.
    """
    nfd = unicodedata.normalize("NFD", resolved)
    candidates = [
        _AM_PM.sub(lambda match: f"{_NARROW_NBSP}{match.group(1)}.", resolved),
        nfd,
        resolved.replace("'", "\u2019"),
        nfd.replace("'", "\u2019"),
    ]
    return [candidate for candidate in candidates if candidate != resolved]


def resolve_read_path(
    path: str, cwd: str, exists: Callable[[str], bool], home: str | None = None
) -> str:
    """Resolve like :func:`resolve_to_cwd`, then try the :func:`read_path_candidates`."""
    resolved = resolve_to_cwd(path, cwd, home)
    if exists(resolved):
        return resolved
    for candidate in read_path_candidates(resolved):
        if exists(candidate):
            return candidate
    return resolved


def relative_posix(path: str, start: str) -> str:
    """``path`` relative to ``start`` with ``/`` separators (both absolute)."""
    return os.path.relpath(path, start).replace(os.sep, "/")
