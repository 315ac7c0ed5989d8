"""``pitrio acp`` given what no editor should send: each line gets the JSON-RPC error with the
right code (and the id it came with, or ``null``), notifications are never answered, and the
process goes on serving; every line it writes stays valid ACP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.transports.acp.harness import Line, SchemaCheck, running_acp, sdk_or_skip, sent_methods


def _request(request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def _code(message: dict[str, Any]) -> int:
    error = message.get("error")
    assert isinstance(error, dict), message
    code = error["code"]
    assert isinstance(code, int)
    return code


async def test_hostile_lines_get_the_right_errors_and_the_agent_keeps_serving(
    work: Path,
) -> None:
    package = sdk_or_skip()
    sent: list[str] = []
    async with running_acp(work) as agent:

        async def send(*lines: Line) -> None:
            sent.extend(line if isinstance(line, str) else json.dumps(line) for line in lines)
            await agent.send(*lines)

        await send("{not json")
        assert await agent.answer(None) == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error"},
        }
        odd: list[tuple[Line, Any, int]] = [
            ("[1, 2]", None, -32600),
            ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "initialize"}, None, -32600),
            ({"jsonrpc": "2.0", "id": True, "method": "initialize"}, None, -32600),
            ({"id": "no-version", "method": "initialize"}, "no-version", -32600),
            (_request("params", "initialize", None) | {"params": "x"}, "params", -32600),
            (_request("unknown", "session/teleport", {}), "unknown", -32601),
            (_request("wrong", "initialize", {"protocolVersion": "one"}), "wrong", -32602),
            (_request(-7, "session/new", {"cwd": "relative/dir"}), -7, -32602),
            (_request(2**53, "session/new", {"cwd": str(work), "mcpServers": 3}), 2**53, -32602),
            (_request("", "session/prompt", {"sessionId": "nope", "prompt": []}), "", -32002),
            (_request(0, "session/list", {"cursor": "!!"}), 0, -32602),
        ]
        for line, request_id, code in odd:
            await send(line)
            assert _code(await agent.answer(request_id)) == code, line
        # Notifications are never answered, known or not; a response to nothing is ignored.
        await send(
            {"jsonrpc": "2.0", "method": "session/teleport", "params": {}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}},
            {"jsonrpc": "2.0", "id": 999, "result": {}},
        )
        # Still serving: ids of each allowed type come back as they were.
        for request_id in (None, 1.5, "s", 12):
            await send(_request(request_id, "initialize", {"protocolVersion": 1}))
            answered = await agent.answer(request_id)
            assert answered["result"]["protocolVersion"] == 1
        await send(_request(20, "session/new", {"cwd": str(work), "mcpServers": []}))
        session_id = (await agent.answer(20))["result"]["sessionId"]
        await send(_request(21, "session/prompt", {"sessionId": session_id, "prompt": "x"}))
        assert _code(await agent.answer(21)) == -32602
        await send(_request(22, "session/close", {"sessionId": session_id}))
        assert (await agent.answer(22))["result"] == {}
        after = [
            _request(23, "session/prompt", {"sessionId": session_id, "prompt": []}),
            _request(24, "session/close", {"sessionId": session_id}),
            _request(25, "session/set_mode", {"sessionId": session_id, "modeId": "off"}),
        ]
        await send(*after)
        assert [_code(await agent.answer(i)) for i in (23, 24, 25)] == [-32002] * 3
        await send(_request(26, "session/list", {}))
        # A session without a message has no file yet (as in pi): nothing to list.
        assert (await agent.answer(26))["result"] == {"sessions": []}
        every = list(agent.written)

    check = SchemaCheck(package)
    methods = sent_methods(sent)
    # An id of 1.5 is JSON-RPC's but not ACP's (integers only): its answer is left out.
    problems = [(line, check.errors(line, methods)) for line in every if '"id":1.5' not in line]
    assert [p for p in problems if p[1]] == []
