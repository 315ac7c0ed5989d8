"""``notifications/tools/list_changed`` against real pi 1.6.0: a server that adds a tool, then
withdraws it (tests/actors/mcp/servers/changing.py, ``direct``; its ``grow``/``shrink``
answer once the client has listed the tools again, so the order is fixed).

Each agent in its own sandbox runs one prompt whose scripted model (Anthropic Messages) calls
``grow``, ``read``, the new tool, ``shrink``, ``read``, the withdrawn tool, then answers. Both
agents must declare the same MCP tools in each request after a listing (the new one while
it is offered, not after its withdrawal) and give the same results.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.actors.mcp.support import SERVERS, forked
from tests.interop.pi_oneshot import pi_argv, pitrio_argv
from tests.interop.pi_steps import text, tool
from tests.interop.test_pi_cli_flags import SETTINGS
from tests.interop.test_pi_codemode import tool_result_texts
from tests.interop.test_pi_mcp_session import run_in
from tests.interop.test_pi_tool_search import names

SERVER = {
    "command": sys.executable,
    "args": forked(str(SERVERS / "changing.py")),
    "exposure": "direct",
}
STEPS = [
    tool("mcp__changing__grow", {"name": "fresh"}),
    tool("read", {"path": "hello.txt"}, id="call_fixed2"),
    tool("mcp__changing__fresh", {}, id="call_fixed3"),
    tool("mcp__changing__shrink", {"name": "fresh"}, id="call_fixed4"),
    tool("read", {"path": "hello.txt"}, id="call_fixed5"),
    tool("mcp__changing__fresh", {}, id="call_fixed6"),
    text("done"),
]


def sandbox(agent: str, base: Path) -> tuple[int, str, list[dict[str, Any]]]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    root = Path(tempfile.mkdtemp(prefix=f"{agent}-", dir=base))
    files = {
        "work/hello.txt": "hello there",
        "agent/settings.json": json.dumps(SETTINGS),
        "agent/mcp.json": json.dumps({"mcpServers": {"changing": SERVER}}),
    }
    for name, content in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(content)
    done, requests = run_in(root, argv or [], ["-p", "change your tools"], STEPS)
    return done.returncode, done.stderr, requests


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, tuple[int, str, list[dict[str, Any]]]]]:
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-list-changed-"))
    try:
        with ThreadPoolExecutor(2) as pool:
            found = pool.map(lambda agent: sandbox(agent, base), ("pi", "pitrio"))
            yield dict(zip(("pi", "pitrio"), found, strict=True))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_both_agents_declare_the_same_tools_as_the_list_changes(
    runs: dict[str, tuple[int, str, list[dict[str, Any]]]],
) -> None:
    declared = {}
    for agent, (code, stderr, requests) in runs.items():
        assert code == 0 and len(requests) == len(STEPS), f"{agent}: {stderr[-600:]}"
        declared[agent] = [[n for n in names(r) if n.startswith("mcp__")] for r in requests]
    plain = ["mcp__changing__grow", "mcp__changing__shrink"]
    grown = [*plain, "mcp__changing__fresh"]
    # The server answers grow and shrink once the client has asked for the list again, but
    # its answer and the listing race to the client, so the request right after each may
    # or may not have the change (in both agents); the one after the next step has it.
    settled = [0, 2, 3, 5, 6]
    assert [declared["pi"][i] for i in settled] == [plain, grown, grown, plain, plain]
    assert [declared["pitrio"][i] for i in settled] == [declared["pi"][i] for i in settled]


def test_both_agents_give_the_same_results(
    runs: dict[str, tuple[int, str, list[dict[str, Any]]]],
) -> None:
    last = {agent: tool_result_texts(requests[-1]) for agent, (_c, _e, requests) in runs.items()}
    assert last["pi"][:5] == [
        "added fresh",
        "hello there",
        "grown fresh",
        "removed fresh",
        "hello there",
    ]
    assert last["pitrio"][:5] == last["pi"][:5]
    # The withdrawn tool is not found by either (each says so in its own words).
    assert "mcp__changing__fresh" in last["pi"][5], last["pi"][5]
    assert "mcp__changing__fresh" in last["pitrio"][5], last["pitrio"][5]
