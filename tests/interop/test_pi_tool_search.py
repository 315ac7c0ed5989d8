"""``tool_search`` and ``deferred`` MCP tools against real pi 1.6.0.

With both test servers ``deferred`` (``mcp-server-time`` with a ``description``), each agent
in its own sandbox: the first request declares the built-in tools and ``tool_search`` and no
MCP tool, and the system prompt's ``mcp_servers`` section lists the same servers (its first
line is each agent's words). The scripted model then searches for "current time", calls the
tool the search loaded, and answers; a second run continues the session (``-c``): the loaded
tool is still declared (the transcript recorded it), and the other deferred tools are not.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import pi_argv, pitrio_argv
from tests.interop.pi_steps import text, tool
from tests.interop.test_pi_cli_flags import SETTINGS
from tests.interop.test_pi_mcp import names_server, time_server
from tests.interop.test_pi_mcp_session import run_in

SERVERS = {
    # get-thing stays direct (names_server's toolExposure); a description makes the section's
    # line independent of when the server connects (1.6.0 does not wait for it).
    "names": names_server(exposure="deferred", description="Things and names"),
    # A direct entry (for no tool) makes 1.6.0's first prompt wait for the server: without
    # it, a resumed session's first request may be built before the server's tools are
    # registered, and 1.6.0 then leaves the tools its transcript loaded undeclared (a race).
    "time": time_server(
        exposure="deferred",
        description="Clock and time zones",
        toolExposure={"no_such_tool": "direct"},
    ),
}
NOW = "mcp__time__get_current_time"
LOADED = [NOW, "mcp__time__convert_time"]
DIRECT = "mcp__names__get_thing"
FIRST = [
    tool("tool_search", {"query": "current time"}),
    tool(NOW, {"timezone": "UTC"}, id="call_fixed2"),
    text("it is now"),
]


def _run(argv: list[str], root: Path, args: list[str], queue: list[dict[str, Any]]) -> Any:
    done, requests = run_in(root, argv, args, queue)
    return done.returncode, done.stderr, requests


def both_runs(agent: str, base: Path) -> dict[str, Any]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    root = Path(tempfile.mkdtemp(prefix=f"{agent}-", dir=base))
    (root / "agent").mkdir()
    (root / "work").mkdir()
    (root / "agent" / "settings.json").write_text(json.dumps(SETTINGS))
    (root / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": SERVERS}))
    first = _run(argv, root, ["-p", "what time is it"], FIRST)
    second = _run(argv, root, ["-c", "-p", "thanks"], [text("welcome")])
    files = sorted((root / "agent" / "sessions").rglob("*.jsonl"))
    entries = [json.loads(line) for line in files[-1].read_text().splitlines()] if files else []
    return {"first": first, "second": second, "entries": entries}


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, dict[str, Any]]]:
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-tool-search-"))
    try:
        with ThreadPoolExecutor(2) as pool:
            done = dict(
                zip(
                    ("pi", "pitrio"),
                    pool.map(lambda a: both_runs(a, base), ("pi", "pitrio")),
                    strict=True,
                )
            )
        yield done
    finally:
        shutil.rmtree(base, ignore_errors=True)


def names(request: dict[str, Any]) -> list[str]:
    return [t["name"] for t in request.get("tools", [])]


def section_lines(request: dict[str, Any]) -> list[str]:
    system = request.get("system", "")
    joined = "\n".join(b.get("text", "") for b in system) if isinstance(system, list) else system
    found = re.search(r"<mcp_servers>\n(.*?)\n</mcp_servers>", joined, re.S)
    return [] if found is None else found.group(1).splitlines()


def test_every_run_succeeded(runs: dict[str, dict[str, Any]]) -> None:
    for agent, found in runs.items():
        for run in ("first", "second"):
            code, stderr, requests = found[run]
            assert code == 0 and requests, f"{agent} {run}: {stderr[-600:]}"


def test_the_first_request_declares_tool_search_and_lists_the_servers(
    runs: dict[str, dict[str, Any]],
) -> None:
    pi, pitrio = (runs[a]["first"][2][0] for a in ("pi", "pitrio"))
    assert names(pi) == ["read", "bash", "edit", "write", "tool_search", DIRECT]
    assert names(pitrio) == names(pi)
    assert section_lines(pi)[1:] == [
        "- mcp__names (tool_search): Things and names",
        "- mcp__time (tool_search): Clock and time zones",
    ]
    assert section_lines(pitrio)[1:] == section_lines(pi)[1:]
    assert "`tool_search`" in section_lines(pitrio)[0]
    for request in (pi, pitrio):
        schema = next(t for t in request["tools"] if t["name"] == "tool_search")["input_schema"]
        assert (sorted(schema["properties"]), schema["required"]) == (["limit", "query"], ["query"])


def test_a_search_loads_the_matches_for_the_next_request(runs: dict[str, dict[str, Any]]) -> None:
    for agent in ("pi", "pitrio"):
        requests = runs[agent]["first"][2]
        assert len(requests) == 3, agent
        for request in requests[1:]:
            assert [n for n in names(request) if n.startswith("mcp__")] == [DIRECT, *LOADED]
        results = [
            e["message"]
            for e in runs[agent]["entries"]
            if e.get("type") == "message" and e["message"].get("role") == "toolResult"
        ]
        assert [(r["toolName"], r["isError"]) for r in results] == [
            ("tool_search", False),
            (NOW, False),
        ], agent
        assert results[0]["details"] == {"loaded": LOADED}, agent


def test_the_loaded_tools_stay_declared_after_a_resume(runs: dict[str, dict[str, Any]]) -> None:
    for agent in ("pi", "pitrio"):
        (request,) = runs[agent]["second"][2]
        assert names(request) == ["read", "bash", "edit", "write", "tool_search", DIRECT, *LOADED]
