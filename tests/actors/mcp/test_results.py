"""MCP tool results as pi's tool-result content (pure)."""

from __future__ import annotations

import base64

import mcp_types

from pitrio.actors.mcp.results import agent_result, convert_result, error_text, limit_text
from pitrio.messages.content import ImageContent, TextContent

PNG = "iVBORw0KGgo="


def _result(*blocks: object, structured: object = None) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult.model_validate(
        {"content": list(blocks), "structuredContent": structured}
    )


def test_text_image_and_resources_map_to_text_and_image_parts() -> None:
    blob = base64.b64encode(b"\x00" * 2048).decode()
    result = _result(
        {"type": "text", "text": "hello"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
        {
            "type": "resource",
            "resource": {"uri": "file:///p.png", "blob": PNG, "mimeType": "image/png"},
        },
        {"type": "resource", "resource": {"uri": "file:///z.bin", "blob": blob}},
        {"type": "audio", "data": blob, "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///l", "name": "log", "mimeType": "text/plain"},
    )
    parts, truncation = convert_result(result)
    assert truncation is None
    assert parts == [
        TextContent(text="hello"),
        ImageContent(data=PNG, mime_type="image/png"),
        TextContent(text="[resource file:///a.txt]\ninside"),
        ImageContent(data=PNG, mime_type="image/png"),
        TextContent(text="[resource file:///z.bin: application/octet-stream, 2.0KB, not shown]"),
        TextContent(text="[audio: audio/wav, 2.0KB, not shown]"),
        TextContent(text="[resource link: log <file:///l>, text/plain]"),
    ]


def test_structured_content_alone_is_shown_as_json() -> None:
    parts, _ = convert_result(_result(structured={"b": 1}))
    assert parts == [TextContent(text='{\n  "b": 1\n}')]
    assert agent_result("s", "t", [], None).content == (TextContent(text="(no output)"),)


def test_large_text_keeps_its_start_and_says_what_was_cut() -> None:
    text = "\n".join(f"line {n}" for n in range(5000))
    parts, truncation = limit_text(
        [TextContent(text=text), ImageContent(data=PNG, mime_type="image/png")]
    )
    assert truncation is not None and truncation["totalLines"] == 5000
    kept = parts[0]
    assert isinstance(kept, TextContent)
    assert kept.text.split("\n") == [f"line {n}" for n in range(2000)]
    assert isinstance(parts[1], ImageContent)  # images are not cut
    assert isinstance(parts[-1], TextContent)
    assert parts[-1].text.startswith("\n[MCP result truncated: showing ")
    assert parts[-1].text.endswith(" (5000 lines)]")


def test_one_huge_line_keeps_its_first_50kb() -> None:
    parts, truncation = limit_text([TextContent(text="x" * 200_000)])
    assert truncation is not None and truncation["totalBytes"] == 200_000
    first = parts[0]
    assert isinstance(first, TextContent) and first.text == "x" * 50 * 1024
    result = agent_result("srv", "big", parts, truncation)
    assert result.details["truncation"]["outputBytes"] == 50 * 1024
    assert (result.details["mcpServer"], result.details["mcpTool"]) == ("srv", "big")


def test_error_text() -> None:
    assert error_text([TextContent(text="a"), ImageContent(data=PNG, mime_type="image/png")]) == "a"
    assert error_text([]) == "MCP tool reported an error"
