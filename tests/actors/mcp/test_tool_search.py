"""``tool_search`` in a session: deferred tools are registered but not active, a search loads
the best matches, and moving in the session's tree keeps what the new branch loaded."""

from __future__ import annotations

from pathlib import Path

from pitrio.actors.mcp.search_tool import DEFERRED_UNREACHABLE, with_loaded
from pitrio.messages.agent import SystemMessage, ToolDeclaration, UserMessage
from tests.actors.mcp.support import McpSession, mcp_session, text, time_server

LOADED = ["mcp__time__get_current_time", "mcp__time__convert_time"]


async def active(s: McpSession) -> list[str]:
    return [tool.name for tool in await s.started.tools.active_tools()]


async def test_a_search_loads_and_navigation_restores_the_branchs_tools(tmp_path: Path) -> None:
    servers = {"time": {**time_server(), "exposure": "deferred"}}
    async with mcp_session(tmp_path, servers) as s:
        assert await active(s) == ["read", "bash", "edit", "write", "tool_search"]
        names = [tool.name for tool in await s.started.tools.all_tools()]
        assert set(LOADED) <= set(names)  # registered, not active
        await s.started.session.prompt('<<tool_search {"query": "current time"}>>')
        result = await s.last_result()
        assert not result.is_error and result.details == {"loaded": LOADED}
        assert text(result).startswith("Loaded 2 tools")
        assert await active(s) == ["read", "bash", "edit", "write", "tool_search", *LOADED]
        await s.started.session.prompt("anything else?")  # declares them on its system message
        entries = await s.started.store.entries()
        users = [
            e
            for e in entries
            if getattr(e, "message", None) is not None and isinstance(e.message, UserMessage)
        ]
        # Back before the search: the branch there never loaded them.
        await s.started.session.navigate_tree(users[0].id)
        assert await active(s) == ["read", "bash", "edit", "write", "tool_search"]
        # And to the later prompt again: they are back.
        await s.started.session.navigate_tree(users[-1].id)
        assert await active(s) == ["read", "bash", "edit", "write", "tool_search", *LOADED]
        await s.started.session.prompt('<<tool_search {"query": "weather"}>>')
        assert text(await s.last_result()) == "No tool matched."


async def test_deferred_tools_without_tool_search_are_a_warning(tmp_path: Path) -> None:
    servers = {"time": {**time_server(), "exposure": "deferred"}}
    async with mcp_session(tmp_path, servers, tool_patterns=("read",)) as s:
        assert await active(s) == ["read"]
        assert DEFERRED_UNREACHABLE in s.started.notices
    async with mcp_session(tmp_path / "2", servers) as s:
        assert DEFERRED_UNREACHABLE not in s.started.notices


def test_with_loaded_keeps_the_active_order_and_adds_what_the_transcript_declares() -> None:
    declared = SystemMessage(
        content="",
        tools_added=(
            ToolDeclaration(name="read", description="", parameters={}),
            ToolDeclaration(name="mcp__a__x", description="", parameters={}),
        ),
        timestamp=0,
    )
    deferred = ["mcp__a__x", "mcp__a__y"]
    assert with_loaded(["read", "mcp__a__y"], [declared], deferred) == ["read", "mcp__a__x"]
    assert with_loaded(["read"], [], deferred) == ["read"]
