"""Which tools a session starts with: pi 1.6.0's ``--tools``, ``--exclude-tools``,
``--no-builtin-tools`` and ``--no-tools`` (docs/cli.md, "Tools"). Pure.

* The default selection is the default built-ins (``read, bash, edit, write``), then every
  extension, custom and MCP tool; ``--no-builtin-tools`` leaves the built-ins out of it.
* ``--tools`` with names or ``*`` patterns replaces it with the tools they match. An MCP
  tool it does not match stays registered but is not declared: 1.6.0 keeps such tools for
  ``codemode`` and ``tool_search`` alone (when no entry starts with ``mcp__``), which pitrio
  does not have yet, and never declares a ``direct`` one. A list of only ``+name`` /
  ``-name`` entries edits the default selection instead (exact names). The two kinds cannot
  be mixed.
* ``--exclude-tools`` (names or patterns) removes tools last, MCP tools included.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

MCP_PREFIX = "mcp__"


class ToolListError(ValueError):
    """A ``--tools`` list pi 1.6.0 refuses; the text says why."""


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(
        "".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern))
    )


def matches(name: str, pattern: str) -> bool:
    """Whether tool ``name`` is ``pattern`` (``*`` matches any characters, nothing else is
    special)."""
    return _pattern(pattern).fullmatch(name) is not None


def is_edit_list(entries: Sequence[str]) -> bool:
    """Whether ``entries`` edit the default selection (every one is ``+name`` / ``-name``)."""
    return bool(entries) and all(entry[:1] in ("+", "-") for entry in entries)


def registered(name: str, tools: Sequence[str] | None, exclude: Sequence[str] = ()) -> bool:
    """Whether 1.6.0 registers MCP tool ``name`` at all under ``--tools`` / ``--exclude-tools``
    (what ``tool_search`` may load): not excluded, and matched by an allowlist that has an
    ``mcp__`` entry (one without such an entry keeps every MCP tool registered)."""
    if any(matches(name, pattern) for pattern in exclude):
        return False
    if tools is None or is_edit_list(tools):
        return True
    if not any(entry.startswith(MCP_PREFIX) for entry in tools):
        return True
    return any(matches(name, entry) for entry in tools)


def tool_list_error(entries: Sequence[str]) -> str | None:
    """Why pi refuses ``entries`` as a ``--tools`` list, or ``None``."""
    edits = [entry for entry in entries if entry[:1] in ("+", "-")]
    if edits and len(edits) != len(entries):
        return "plain tool names and +name/-name entries cannot be mixed"
    for entry in edits:
        name = entry[1:]
        if not name:
            return f"{entry!r} names no tool"
        if "*" in name:
            return f"{entry!r}: +name/-name entries take exact tool names, not * patterns"
    return None


def default_selection(
    default_tools: Sequence[str],
    builtin_defaults: Sequence[str] = ("read", "bash", "edit", "write"),
) -> list[str]:
    """The startup selection of a ``defaultTools`` setting (pi 1.6.0): its plain names replace
    ``builtin_defaults``, then its ``+name``/``-name`` entries apply in order; ``[]`` is no
    built-in tool."""
    plain = [entry for entry in default_tools if entry[:1] not in ("+", "-")]
    selection = list(plain) if plain or not default_tools else list(builtin_defaults)
    for entry in default_tools:
        name = entry[1:]
        if entry[:1] == "+" and name not in selection:
            selection.append(name)
        elif entry[:1] == "-" and name in selection:
            selection.remove(name)
    return selection


def select_tools(
    *,
    builtin: Sequence[str],
    defaults: Sequence[str],
    extra: Sequence[str],
    mcp: Sequence[str] = (),
    tools: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    no_tools: bool = False,
    no_builtin_tools: bool = False,
    inactive: Sequence[str] = (),
) -> list[str]:
    """The names of the tools to activate, in the order pi 1.6.0 declares them: an allowlist's
    in the order of its entries (a pattern's matches in registration order: built-ins, then
    ``extra`` extension and custom tools, then ``mcp``), else the ``defaults`` in their order,
    the other tools but ``inactive`` ones, then ``+name`` additions. Raises
    :class:`ToolListError`."""
    if no_tools:
        return []
    everything = [*builtin, *extra, *mcp]
    # The default selection keeps its own order (pi 1.6.0 declares defaultTools' names in
    # the order given), then the extension, custom and MCP tools, then ``+name`` additions.
    default = [] if no_builtin_tools else [name for name in defaults if name in everything]
    # ``inactive`` tools (pi's ``defaultActive: false``, e.g. ``codemode``) are active only
    # when a selection names them.
    others = [name for name in extra if name not in inactive]
    selected = list(dict.fromkeys([*default, *others, *mcp]))
    if tools is not None:
        why = tool_list_error(tools)
        if why is not None:
            raise ToolListError(why)
        if is_edit_list(tools):
            for entry in tools:
                name = entry[1:]
                if entry[0] == "+" and name in everything and name not in selected:
                    selected.append(name)
                elif entry[0] == "-" and name in selected:
                    selected.remove(name)
        else:
            # An allowlist declares its tools in the order of its entries (a pattern's
            # matches in registration order), as pi 1.6.0 does.
            ordered: list[str] = []
            for entry in tools:
                ordered += [n for n in everything if matches(n, entry) and n not in ordered]
            return [n for n in ordered if not any(matches(n, p) for p in exclude)]
    return [n for n in selected if not any(matches(n, p) for p in exclude)]
