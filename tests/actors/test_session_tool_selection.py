"""pi 1.6.0's tool selection (``--tools``, ``--exclude-tools``, ``--no-builtin-tools``)."""

from __future__ import annotations

import pytest

from pitrio.actors.session.tool_selection import (
    ToolListError,
    default_selection,
    matches,
    registered,
    select_tools,
    tool_list_error,
)

BUILTIN = ("read", "bash", "edit", "write", "grep", "find", "ls")
DEFAULTS = ("read", "bash", "edit", "write")
EXTRA = ("todo",)
MCP = ("mcp__git__log", "mcp__web__fetch")


def pick(**kwargs: object) -> list[str]:
    return select_tools(builtin=BUILTIN, defaults=DEFAULTS, extra=EXTRA, mcp=MCP, **kwargs)  # type: ignore[arg-type]


def test_default_selection_and_no_builtin_tools() -> None:
    assert pick() == ["read", "bash", "edit", "write", "todo", *MCP]
    assert pick(no_builtin_tools=True) == ["todo", *MCP]
    assert pick(no_builtin_tools=True, tools=["+ls"]) == ["todo", *MCP, "ls"]
    assert pick(no_tools=True, tools=["read"]) == []


def test_allowlist_keeps_entry_order_and_declares_only_the_mcp_tools_it_matches() -> None:
    # pi 1.6.0 keeps unmatched MCP tools for codemode and tool_search only, never declared
    # (tests/interop/test_pi_mcp.py checks it against real pi).
    assert pick(tools=["ls", "read"]) == ["ls", "read"]
    # "*i*" matches mcp__git__log too.
    assert pick(tools=["ls", "*i*"]) == ["ls", "edit", "write", "find", "mcp__git__log"]
    assert pick(tools=["read", "mcp__git__*"]) == ["read", "mcp__git__log"]
    assert pick(tools=["nosuch"]) == []


def test_edit_lists_change_the_default_selection() -> None:
    # Additions come last, as pi 1.6.0 declares them.
    assert pick(tools=["+grep", "-bash"]) == ["read", "edit", "write", "todo", *MCP, "grep"]
    assert pick(tools=["-todo", "+nosuch"]) == ["read", "bash", "edit", "write", *MCP]


def test_exclude_runs_last_and_reaches_mcp() -> None:
    assert pick(exclude=["*i*"]) == ["read", "bash", "todo", "mcp__web__fetch"]
    assert pick(tools=["read", "ls", "find"], exclude=["f*", "mcp__*"]) == ["read", "ls"]


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        (["read", "+ls"], "cannot be mixed"),
        (["+"], "names no tool"),
        (["-b*"], "not * patterns"),
    ],
)
def test_refused_lists(entries: list[str], error: str) -> None:
    why = tool_list_error(entries)
    assert why is not None and error in why
    with pytest.raises(ToolListError, match=error.replace("*", r"\*")):
        pick(tools=entries)


def test_patterns_are_globs_of_star_only() -> None:
    assert matches("mcp__a.b__c", "mcp__a.b__*")
    assert not matches("mcp__axb__c", "mcp__a.b__*")  # "." is literal
    assert matches("read", "*") and matches("read", "r*d") and not matches("read", "rea")


def test_default_tools_setting() -> None:
    assert default_selection(["ls", "read"]) == ["ls", "read"]  # plain names replace
    assert default_selection(["-bash", "+grep"]) == ["read", "edit", "write", "grep"]
    assert default_selection(["ls", "+grep", "-ls"]) == ["grep"]  # plain, then edits in order
    assert default_selection([]) == []  # no built-in tool
    defaults = default_selection(["ls", "read", "todo"])
    assert pick(tools=None, exclude=()) != pick(tools=["+find"])
    got = select_tools(builtin=BUILTIN, defaults=defaults, extra=EXTRA, tools=["+find"])
    assert got == ["ls", "read", "todo", "find"]  # the setting's order is kept


def test_which_mcp_tools_stay_registered_for_tool_search() -> None:
    assert registered("mcp__git__log", None)
    assert registered("mcp__git__log", ["read"])  # no mcp__ entry: every MCP tool stays
    assert not registered("mcp__git__log", ["read", "mcp__web__*"])
    assert registered("mcp__web__fetch", ["read", "mcp__web__*"])
    assert not registered("mcp__web__fetch", None, ["mcp__web__*"])
    assert registered("mcp__web__fetch", ["+read"])
