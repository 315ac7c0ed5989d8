"""Sorting text as pi sorts it with JavaScript's ``localeCompare`` (pure; model listings,
the MCP servers of the system prompt)."""

from __future__ import annotations

_PUNCTUATION = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"
"""ASCII punctuation and symbols in the Unicode collation's root order (before digits)."""


def collation_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A sort key that orders ASCII text as JavaScript's ``localeCompare`` does (the Unicode
    collation's root order, which pi's model list uses): whitespace, punctuation, digits,
    then letters regardless of case; case decides only between otherwise equal strings
    (lower first). Other characters follow, by code point."""
    primary: list[int] = []
    case: list[int] = []
    for char in text:
        if char.isspace():
            weight = 0
        elif (index := _PUNCTUATION.find(char)) >= 0:
            weight = 1 + index
        elif "0" <= char <= "9":
            weight = 100 + ord(char)
        elif char.isascii() and char.isalpha():
            weight = 200 + ord(char.lower())
        else:
            weight = 1000 + ord(char)
        primary.append(weight)
        case.append(1 if char.isupper() else 0)
    return tuple(primary), tuple(case)
