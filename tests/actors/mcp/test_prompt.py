"""The ``mcp_servers`` section's limits (its lines against pi's renderer:
tests/interop/test_pi_mcp_section.py)."""

from __future__ import annotations

from pitrio.actors.mcp.naming import Exposure, declared_exposure
from pitrio.actors.mcp.prompt import MAX_SECTION, ListedServer, render_servers_section


def same(exposure: Exposure) -> Exposure:
    return exposure


def test_servers_that_do_not_fit_are_counted_in_a_last_line() -> None:
    servers = [ListedServer(f"server-number-{n:04d}", description="d" * 50) for n in range(400)]
    text = render_servers_section(servers, same)
    assert text is not None and len(text) <= MAX_SECTION
    lines = text.splitlines()
    kept = [line for line in lines if line.startswith("- mcp__")]
    assert 0 < len(kept) < 400
    assert lines[-1] == f"- \u2026 {400 - len(kept)} more servers (searchTools() finds their tools)"
    assert all(line.endswith("(codemode)") for line in kept)  # no room left for summaries


def test_a_few_servers_share_the_room_for_summaries() -> None:
    servers = [ListedServer(f"s{n}", exposure="deferred", description="w " * 300) for n in range(3)]
    text = render_servers_section(servers, same)
    assert text is not None
    summaries = [line.split(": ", 1)[1] for line in text.splitlines()[1:]]
    assert all(len(s) <= 250 and s.endswith("\u2026") for s in summaries)
    assert "`tool_search`" in text.splitlines()[0] and "`codemode`" not in text.splitlines()[0]


def test_pitrio_lists_servers_reached_by_codemode_and_by_tool_search() -> None:
    servers = [
        ListedServer("a"),
        ListedServer("b", exposure="deferred"),
        ListedServer("c", exposure="direct"),
    ]
    text = render_servers_section(servers, declared_exposure)
    assert text is not None
    assert text.splitlines()[1:] == ["- mcp__a (codemode)", "- mcp__b (tool_search)"]
    assert "codemode script" in text.splitlines()[0]
