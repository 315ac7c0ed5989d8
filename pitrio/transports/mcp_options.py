"""The option parsing of ``pitrio mcp``'s subcommands (pi's rules: ``--name value``, ``-l``
for ``--local``, ``--`` ending the options), shared by :mod:`pitrio.transports.mcp_cli` and
:mod:`pitrio.transports.mcp_login`."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from pitrio.errors import PitrioError

HINT = 'See "pitrio mcp --help".'
Kind = Literal["flag", "value", "list"]


class UsageError(PitrioError):
    """A command line ``pitrio mcp`` cannot run."""


class Parsed:
    """Positional arguments, option values and repeated options."""

    def __init__(self) -> None:
        self.positional: list[str] = []
        self.values: dict[str, str | bool] = {}
        self.lists: dict[str, list[str]] = {}

    def value(self, name: str) -> str | None:
        """An option's value, if given."""
        found = self.values.get(name)
        return found if isinstance(found, str) else None


def parse_options(
    args: Sequence[str], known: Mapping[str, Kind], max_positional: int = sys.maxsize
) -> Parsed:
    """``--name value`` options; ``--`` or the ``max_positional``-th positional argument ends
    them (the rest is positional). Raises :class:`UsageError`."""
    parsed = Parsed()
    index = 0
    while index < len(args):
        arg = "--local" if args[index] == "-l" else args[index]
        if arg == "--" or len(parsed.positional) >= max_positional:
            parsed.positional += args[index + 1 if arg == "--" else index :]
            break
        index += 1
        if not arg.startswith("--"):
            parsed.positional.append(arg)
            continue
        name = arg[2:]
        kind = known.get(name)
        if kind is None:
            raise UsageError(f"Unknown option {args[index - 1]}. {HINT}")
        if kind == "flag":
            parsed.values[name] = True
            continue
        if index >= len(args):
            raise UsageError(f"{arg} needs a value.")
        value = args[index]
        index += 1
        if kind == "list":
            parsed.lists.setdefault(name, []).append(value)
        else:
            parsed.values[name] = value
    return parsed
