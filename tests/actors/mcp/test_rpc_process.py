"""End to end: a real ``pitrio --mode rpc`` process with ``--mcp-config`` and a project
``.pitrio/mcp.json``, the faux model calling MCP tools (the fixtures' ``<<tool {json}>>``)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from tests.actors.mcp.support import WAIT, edge_server, time_server
from tests.transports.rpc.harness import Dirs, rpc_process


async def test_rpc_process_calls_mcp_tools_and_reports_servers(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    config = tmp_path / "servers.json"
    config.write_bytes(orjson.dumps({"mcpServers": {"time": time_server()}}))
    project = dirs.cwd / ".pitrio" / "mcp.json"
    project.parent.mkdir()
    project.write_bytes(orjson.dumps({"mcpServers": {"edge": edge_server(tmp_path / "m")}}))
    # --approve: a project's mcp.json loads only for a trusted project (pi 1.6.0)
    async with rpc_process(dirs, "--approve", "--mcp-config", str(config)) as rpc:
        await rpc.send({"id": "s0", "type": "get_state"})
        # Answered without waiting for the servers (pi 1.6.0 connects them in the background).
        state = await rpc.response("s0", WAIT)
        assert state["success"] is True
        servers = {s["name"]: s for s in state["data"]["mcpServers"]}
        assert {
            name: server["status"] in ("starting", "running") for name, server in servers.items()
        } == {"time": True, "edge": True}
        assert list(state["data"])[:-1] == [  # pi's fields as they were, pitrio's last
            "model", "thinkingLevel", "isStreaming", "isCompacting", "steeringMode",
            "followUpMode", "sessionFile", "sessionId", "autoCompactionEnabled",
            "messageCount", "pendingMessageCount",
        ]  # fmt: skip

        prompt = (
            'PARALLEL <<mcp__time__get_current_time {"timezone": "UTC"}>> <<mcp__edge__picture {}>>'
        )
        assert (await rpc.request({"type": "prompt", "message": prompt}))["success"] is True
        await rpc.event("agent_settled")
        ends = {e["toolName"]: e for e in rpc.by_type["tool_execution_end"]}
        clock = ends["mcp__time__get_current_time"]
        assert clock["isError"] is False
        assert json.loads(clock["result"]["content"][0]["text"])["timezone"] == "UTC"
        picture = ends["mcp__edge__picture"]["result"]["content"]
        assert [part["type"] for part in picture] == ["image"]
        assert picture[0]["mimeType"] == "image/png"
        # The prompt waited for the servers with direct tools: both are up now.
        servers = {s["name"]: s for s in (await rpc.data({"type": "get_state"}))["mcpServers"]}
        assert servers["time"] == {
            "name": "time",
            "status": "running",
            "tools": ["get_current_time", "convert_time"],
        }
        assert servers["edge"]["status"] == "running"


async def test_rpc_get_state_without_mcp_servers_keeps_pis_shape(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    async with rpc_process(dirs) as rpc:
        data = await rpc.data({"type": "get_state"})
        assert "mcpServers" not in data


async def test_rpc_a_missing_mcp_config_file_stops_start_up_naming_it(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    missing = tmp_path / "nope.json"
    async with rpc_process(dirs, "--mcp-config", str(missing)) as rpc:
        await rpc.send({"id": "s", "type": "get_state"})
        code = await rpc.wait_exit()
        assert code == 1
        assert f"MCP config file not found: {missing}" in rpc.stderr.decode()
        assert "Traceback" not in rpc.stderr.decode()


async def test_a_lone_surrogate_never_reaches_an_mcp_server(tmp_path: Path) -> None:
    """Issue 36: a model's argument with a lone surrogate is an error tool result naming it
    (the SDK's writer would fail on it), and the server keeps serving."""
    dirs = Dirs.make(tmp_path)
    config = tmp_path / "servers.json"
    config.write_bytes(orjson.dumps({"mcpServers": {"time": time_server()}}))
    async with rpc_process(dirs, "--mcp-config", str(config)) as rpc:
        await rpc.send({"id": "s0", "type": "get_state"})
        assert (await rpc.response("s0", WAIT))["success"] is True
        bad = '<<mcp__time__get_current_time {"timezone": "UTC\\ud800"}>>'
        await rpc.data({"type": "prompt", "message": f"go {bad}"})
        end = await rpc.event("tool_execution_end")
        assert end["isError"] is True
        assert end["result"]["content"][0]["text"] == (
            "The arguments.timezone contains a lone surrogate (\\ud800 at offset 3): "
            "it cannot be encoded as UTF-8"
        )
        await rpc.event("agent_settled")
        good = '<<mcp__time__get_current_time {"timezone": "UTC"}>>'
        await rpc.data({"type": "prompt", "message": f"go {good}"})
        end = await rpc.event("tool_execution_end", 2)
        assert end["isError"] is False, end
        assert json.loads(end["result"]["content"][0]["text"])["timezone"] == "UTC"
