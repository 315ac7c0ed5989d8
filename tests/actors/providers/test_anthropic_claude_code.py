"""Claude Code's tool names under an Anthropic OAuth token, both ways, over loopback HTTP.

The reply streams are written from Anthropic's documented Messages API stream format
(``message_start``, ``content_block_*`` with ``tool_use`` and ``input_json_delta``,
``message_delta``, ``message_stop``).
"""

from __future__ import annotations

import orjson
import pytest

from pitrio.actors.model_router.providers.anthropic import build_request
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.claude_code import (
    CLAUDE_CODE_TOOLS,
    claude_code_name,
)
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages import ToolCall, user_message
from pitrio.messages.model import LlmContext, StreamOptions, ToolSpec
from pitrio.messages.stream import ToolCallStart
from tests.actors.providers.loopback import LoopbackServer, sse
from tests.actors.providers.support import (
    TOOLS,
    assistant,
    collect,
    credentials,
    final,
    make_model,
    make_provider,
    tool_result,
)

API = "anthropic-messages"
OAUTH = "sk-ant-oat01-0123456789"
OWN_TOOL = ToolSpec(name="my_lookup", description="Look up", parameters={"type": "object"})
EDIT_UPPER = ToolSpec(name="EDIT", description="Edit", parameters={"type": "object"})
CONTEXT = LlmContext(
    system_prompt="sys",
    messages=(
        user_message("read a.txt", timestamp=1),
        assistant(
            ToolCall(id="toolu_1", name="read", arguments={"path": "a.txt"}),
            ToolCall(id="toolu_2", name="my_lookup", arguments={}),
            api=API,
            stop_reason="toolUse",
        ),
        tool_result("toolu_1", "contents of a"),
        tool_result("toolu_2", "found", name="my_lookup"),
    ),
    tools=(*TOOLS, OWN_TOOL, EDIT_UPPER),
)


def _event(name: str, payload: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {orjson.dumps(payload).decode()}\n\n".encode()


def tool_calls_reply(*names: str) -> bytes:
    """A streamed answer of one tool call per name, each with ``{}`` as its input."""
    out = _event(
        "message_start",
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                        "model": "claude", "usage": {"input_tokens": 10, "output_tokens": 1}},
        },
    )  # fmt: skip
    for index, name in enumerate(names):
        block = {"type": "tool_use", "id": f"toolu_r{index}", "name": name, "input": {}}
        out += _event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
        delta = {"type": "input_json_delta", "partial_json": orjson.dumps({"n": index}).decode()}
        out += _event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        out += _event("content_block_stop", {"type": "content_block_stop", "index": index})
    out += _event(
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 5}},
    )  # fmt: skip
    return out + _event("message_stop", {"type": "message_stop"})


def test_the_casing_table_is_claude_codes() -> None:
    assert claude_code_name("read") == "Read"
    assert claude_code_name("TODOWRITE") == "TodoWrite"
    assert claude_code_name("webfetch") == "WebFetch"
    assert claude_code_name("my_lookup") == "my_lookup"
    assert claude_code_name("reader") == "reader"  # whole names only
    assert len(CLAUDE_CODE_TOOLS) == 17


async def test_oauth_request_sends_claude_code_names_and_reports_its_own(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(sse(tool_calls_reply("Read", "Bash", "my_lookup", "Edit", "Glob")))
    model = make_model(API, server.base_url)
    provider = make_provider(API, pool, credentials(OAUTH))
    events = await collect(provider, model, CONTEXT)

    body = server.requests[0].json()
    assert server.requests[0].headers["authorization"] == f"Bearer {OAUTH}"
    assert [tool["name"] for tool in body["tools"]] == ["Read", "Bash", "my_lookup", "Edit"]
    calls = [
        block["name"]
        for turn in body["messages"]
        for block in turn["content"]
        if block["type"] == "tool_use"
    ]
    assert calls == ["Read", "my_lookup"]
    results = [block["tool_use_id"] for block in body["messages"][2]["content"]]
    assert results == ["toolu_1", "toolu_2"]

    message = final(events)
    started = [
        event.partial.content[event.content_index].name  # type: ignore[union-attr]
        for event in events
        if isinstance(event, ToolCallStart)
    ]
    # Back under the names the tools were given; one the request did not offer is kept.
    assert started == ["read", "bash", "my_lookup", "EDIT", "Glob"]
    assert [call.name for call in message.content] == started  # type: ignore[union-attr]
    assert [call.arguments for call in message.content] == [  # type: ignore[union-attr]
        {"n": index} for index in range(5)
    ]
    assert message.stop_reason == "toolUse"


async def test_an_api_key_keeps_every_name_as_it_is(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(sse(tool_calls_reply("Read", "bash")))
    model = make_model(API, server.base_url)
    events = await collect(make_provider(API, pool), model, CONTEXT)
    body = server.requests[0].json()
    assert [tool["name"] for tool in body["tools"]] == ["read", "bash", "my_lookup", "EDIT"]
    assert body["messages"][1]["content"][0]["name"] == "read"
    # pi maps a reply's names back only under an OAuth token.
    assert [call.name for call in final(events).content] == ["Read", "bash"]  # type: ignore[union-attr]


@pytest.mark.parametrize("provider", ["github-copilot", "test"])
def test_a_copilot_token_is_never_taken_for_an_oauth_one(provider: str) -> None:
    model = make_model(API, provider=provider)
    request = build_request(
        model, CONTEXT, StreamOptions(), api_key=OAUTH, headers={}, settings=ProviderSettings()
    )
    names = [tool["name"] for tool in request.json()["tools"]]
    if provider == "github-copilot":
        assert names[0] == "read" and "x-app" not in request.headers
    else:
        assert names[0] == "Read" and request.headers["x-app"] == "cli"
