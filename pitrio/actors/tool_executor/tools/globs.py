"""Glob patterns as ``fd --glob`` and ``rg --glob`` read them, compiled to regular expressions.

``*`` and ``?`` stay within one path component, ``**`` spans components (``**/`` also matches
nothing), ``[...]`` is a character class (``[!...]`` negated), ``{a,b}`` is an alternation
and ``\\`` escapes the next character. Pure.
"""

from __future__ import annotations

import re
from functools import lru_cache


def _class(pattern: str, start: int) -> tuple[str, int] | None:
    """Translate the class opening at ``pattern[start] == '['``; ``None`` if it never closes."""
    index = start + 1
    negate = False
    if index < len(pattern) and pattern[index] in "!^":
        negate = True
        index += 1
    body: list[str] = []
    first = True
    while index < len(pattern):
        char = pattern[index]
        if char == "]" and not first:
            inner = "".join(body)
            return (f"[^{inner}]" if negate else f"[{inner}]"), index + 1
        first = False
        if char == "\\" and index + 1 < len(pattern):
            body.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        if char == "-" and body and index + 1 < len(pattern) and pattern[index + 1] != "]":
            body.append("-")
        else:
            body.append(re.escape(char))
        index += 1
    return None


def _translate(pattern: str) -> str:
    out: list[str] = []
    index = 0
    length = len(pattern)
    while index < length:
        char = pattern[index]
        if char == "*":
            if pattern.startswith("**", index):
                before_ok = index == 0 or pattern[index - 1] == "/"
                after = index + 2
                if before_ok and after < length and pattern[after] == "/":
                    out.append("(?:.*/)?")  # "**/": any number of directories, even none
                    index = after + 1
                    continue
                if before_ok and after == length:
                    out.append(".*")  # trailing "**": everything below
                    index = after
                    continue
                out.append("[^/]*")  # "**" inside a component is just "*"
                index = after
                continue
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[":
            translated = _class(pattern, index)
            if translated is None:
                out.append(re.escape(char))
                index += 1
            else:
                out.append(translated[0])
                index = translated[1]
        elif char == "{":
            close, alternatives = _alternatives(pattern, index)
            if close == -1:
                out.append(re.escape(char))
                index += 1
            else:
                out.append("(?:" + "|".join(_translate(alt) for alt in alternatives) + ")")
                index = close + 1
        elif char == "\\" and index + 1 < length:
            out.append(re.escape(pattern[index + 1]))
            index += 2
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def _alternatives(pattern: str, start: int) -> tuple[int, list[str]]:
    """Split ``{a,b,{c,d}}`` at top-level commas; returns the closing index (or -1)."""
    depth = 0
    pieces: list[str] = []
    current: list[str] = []
    index = start
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            current.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "{":
            depth += 1
            if depth > 1:
                current.append(char)
        elif char == "}":
            depth -= 1
            if depth == 0:
                pieces.append("".join(current))
                return index, pieces
            current.append(char)
        elif char == "," and depth == 1:
            pieces.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    return -1, []


@lru_cache(maxsize=256)
def compile_glob(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """The regular expression matching exactly the strings ``pattern`` matches."""
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.compile(f"(?:{_translate(pattern)})\\Z", flags)


def has_uppercase(pattern: str) -> bool:
    """fd's smart case: a pattern with an uppercase letter is matched case-sensitively."""
    return any(char.isupper() for char in pattern)
