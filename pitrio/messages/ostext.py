"""The boundary check for strings bound for the operating system (issue 36).

A Python string can hold what no OS-level encoding carries: a NUL character (a command line, a
path and an environment value end at the first one) and a lone surrogate (``"\\ud800"``, which
JSON lets a client or a model write as an escape, and which UTF-8 cannot encode). Written to a
JSON file such a string is fine (:func:`pitrio.messages.codec.dumps` escapes a lone surrogate as
JavaScript does), so it is accepted everywhere a string is only data; where it reaches an
``argv``, a path, an environment, a subprocess's stdin or a socket that needs UTF-8 bytes it is
checked here first, so the caller answers with an error naming the field instead of failing
deep inside the encoding with a bare ``UnicodeEncodeError`` or ``ValueError``.

Pure: no I/O, nothing of pitrio but :mod:`pitrio.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pitrio.errors import UnencodableTextError

__all__ = [
    "check_environment",
    "check_json_texts",
    "check_os_text",
    "check_os_texts",
    "json_text_problem",
    "os_text_problem",
]


def os_text_problem(value: str, field: str, *, from_os: bool = False) -> str | None:
    """Why ``value`` (the ``field`` of something) cannot reach the OS, or ``None`` if it can.

    The first NUL character or lone surrogate is named with its offset (in code points).
    ``from_os``: ``value`` may be a name the OS gave (the process's cwd, a command-line
    argument), where Python keeps each byte that is not UTF-8 as a surrogate U+DC80..U+DCFF
    (``surrogateescape``); those are the name's real bytes and go back as they came. A client
    or a model cannot mean raw bytes (pi, in JavaScript, would write U+FFFD instead), so their
    strings are checked without it.
    """
    if value.isascii():  # the common case: one C scan, no copy
        where = value.find("\0")
        if where < 0:
            return None
        return _nul(field, where)
    try:
        value.encode("utf-8", "surrogateescape" if from_os else "strict")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        nul = value.find("\0", 0, exc.start)
        if nul >= 0:
            return _nul(field, nul)
        return (
            f"The {field} contains a lone surrogate (\\u{ord(bad):04x} at offset {exc.start}): "
            "it cannot be encoded as UTF-8"
        )
    where = value.find("\0")
    return None if where < 0 else _nul(field, where)


def _nul(field: str, where: int) -> str:
    return f"The {field} contains a NUL character (at offset {where}): the OS cannot take one"


def check_os_text(value: str, field: str, *, from_os: bool = False) -> str:
    """``value`` unchanged if it can reach the OS; else :class:`UnencodableTextError` naming
    ``field`` (e.g. ``"path"``, ``"outputPath"``, ``"environment variable HOME"``); ``from_os``
    as in :func:`os_text_problem`."""
    problem = os_text_problem(value, field, from_os=from_os)
    if problem is not None:
        raise UnencodableTextError(problem)
    return value


def check_os_texts(values: Iterable[str], field: str, *, from_os: bool = False) -> None:
    """Check each of ``values`` (an argument list): the first bad one is named as
    ``field`` and its position (``"argument 2"``)."""
    for index, value in enumerate(values):
        check_os_text(value, f"{field} {index}", from_os=from_os)


def check_environment(
    env: Mapping[str, str], field: str = "environment", *, from_os: bool = False
) -> None:
    """Check every name and value of ``env`` (``"environment variable name FOO"``); a name also
    may not hold ``=``, which would end it early. Names are shown quoted (``repr``), so a message
    never carries the bad character itself."""
    for name, value in env.items():
        check_os_text(name, f"{field} variable name {name!r}", from_os=from_os)
        if "=" in name:
            raise UnencodableTextError(
                f"The {field} variable name {name!r} contains '=': no environment can hold it"
            )
        check_os_text(value, f"{field} variable {name!r}", from_os=from_os)


def json_text_problem(value: object, field: str) -> str | None:
    """Why the JSON value ``value`` cannot be sent as UTF-8 (a string or key in it holds a lone
    surrogate), or ``None``; the string is named by its place (``arguments.edits[0].newText``).

    A NUL is fine here: JSON writes it as ``\\u0000``. For payloads that a library serialises
    strictly (an MCP call, a frame of another program's protocol) before they reach a socket
    or a pipe.
    """
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"The {field} contains a lone surrogate (\\u{ord(value[exc.start]):04x} at offset "
                f"{exc.start}): it cannot be encoded as UTF-8"
            )
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            key_text = str(key)
            if (problem := json_text_problem(key_text, f"{field} key {key_text!r}")) is not None:
                return problem
            if (problem := json_text_problem(item, f"{field}.{key_text}")) is not None:
                return problem
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (problem := json_text_problem(item, f"{field}[{index}]")) is not None:
                return problem
    return None


def check_json_texts(value: object, field: str) -> None:
    """:func:`json_text_problem` as an :class:`UnencodableTextError`."""
    problem = json_text_problem(value, field)
    if problem is not None:
        raise UnencodableTextError(problem)
