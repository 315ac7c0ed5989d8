"""The editor's MCP servers (``mcpServers`` of ``session/new``) run for the session: a stdio
server and a streamable-HTTP one (its header passed as given), started by the test, reached
through the official TypeScript client; the model calls a tool of each and the editor sees
the calls as ``tool_call`` / ``tool_call_update``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from pitrio.transports.acp.jsonrpc import RpcError
from pitrio.transports.acp.messages import mcp_servers
from tests.actors.mcp.support import KILL_SERVER, SERVERS, forked, wait_for
from tests.transports.acp.harness import sdk_or_skip
from tests.transports.acp.test_acp_sdk import _client, _result, _updates_before


async def test_the_editors_stdio_and_http_servers_reach_the_model(tmp_path: Path) -> None:
    package = sdk_or_skip()
    work = tmp_path / "work"
    work.mkdir()
    markers, port_file = tmp_path / "markers", tmp_path / "port"
    markers.mkdir()
    http = await trio.lowlevel.open_process(
        [sys.executable, *forked(str(SERVERS / "http_edge.py"), str(port_file))]
    )
    try:
        await wait_for(port_file.exists, "the HTTP server to listen")
        port = int(port_file.read_text())
        servers = [
            {
                "name": "edge",
                "command": sys.executable,
                "args": forked(str(SERVERS / "edge.py"), str(markers)),
                "env": [{"name": "EDGE_NOTE", "value": "$NOT_A_TEMPLATE"}],
            },
            {
                "type": "http",
                "name": "http edge",
                "url": f"http://127.0.0.1:{port}/mcp",
                # As given: pitrio's mcp.json would read "${...}" as a template, unset here.
                "headers": [{"name": "Authorization", "value": "Bearer ${NOT_SET_HERE}"}],
            },
        ]
        prompt = '<<mcp__edge__typed {"count":2,"name":"ab"}>> then <<mcp__http_edge__whoami {}>>'
        args = {"cwd": str(work), "mcpServers": servers, "prompt": prompt}
        seen = await _client(package, work, "mcp", args)
    finally:
        http.send_signal(KILL_SERVER)
        with trio.CancelScope(shield=True):
            await http.wait()
    init = next(item for item in seen if item.get("step") == "initialize")["value"]
    assert init["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
    assert _result(seen, "prompt-mcp") == {"stopReason": "end_turn"}
    assert (markers / "typed.called").read_text() == "2 ab"
    updates = _updates_before(seen, "prompt-mcp")
    starts = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert [u["title"].split()[0] for u in starts][:2] == [
        "mcp__edge__typed",
        "mcp__http_edge__whoami",
    ], starts
    done = {
        u["toolCallId"]: u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
    }
    texts = [_content_text(done[start["toolCallId"]]) for start in starts[:2]]
    assert texts == ["abab", "auth=Bearer ${NOT_SET_HERE}"]


def _content_text(update: dict[str, Any]) -> str:
    return "".join(
        block["content"]["text"] for block in update.get("content") or [] if "content" in block
    )


def test_acp_server_shapes_become_mcp_json_entries() -> None:
    params = {
        "mcpServers": [
            {
                "name": "a b",
                "command": "/bin/x",
                "args": ["-v"],
                "env": [{"name": "K", "value": "v"}],
            },
            {"type": "http", "name": "h", "url": "http://h/mcp", "headers": []},
        ]
    }
    assert mcp_servers(params) == (
        ("a_b", {"command": "/bin/x", "args": ["-v"], "env": {"K": "v"}}),
        ("h", {"type": "http", "url": "http://h/mcp", "headers": {}}),
    )
    assert mcp_servers({}) == ()


@pytest.mark.parametrize(
    "servers",
    [
        {"name": "x"},
        [{"type": "sse", "name": "s", "url": "http://h", "headers": []}],
        [{"name": "s", "command": 3, "args": [], "env": []}],
        [{"name": "s", "command": "/x", "args": [1], "env": []}],
        [{"name": "s", "command": "/x", "args": [], "env": [{"name": "K"}]}],
        [{"type": "http", "name": "h", "url": None, "headers": []}],
        [{"type": "ws", "name": "h", "url": "ws://h"}],
        ["stdio"],
    ],
)
def test_bad_mcp_servers_are_invalid_params(servers: Any) -> None:
    with pytest.raises(RpcError) as caught:
        mcp_servers({"mcpServers": servers})
    assert caught.value.code == -32602
