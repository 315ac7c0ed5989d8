"""MCP tool results as pi 1.6.0 gives them to the model (pure but for the saved files)."""

from __future__ import annotations

import base64
from pathlib import Path

import mcp_types

from pitrio.actors.mcp.results import convert_result, cut_middle, limit_parts
from pitrio.messages.content import ImageContent, TextContent

PNG = "iVBORw0KGgo="


def _result(
    *blocks: object, structured: object = None, error: bool = False
) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult.model_validate(
        {"content": list(blocks), "structuredContent": structured, "isError": error}
    )


class Saved:
    """A saver writing into a test's folder, remembering what it wrote."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.files: list[Path] = []

    def __call__(self, data: bytes, extension: str) -> str:
        path = self.folder / f"saved-{len(self.files)}{extension}"
        path.write_bytes(data)
        self.files.append(path)
        return str(path)


def test_blocks_map_to_text_and_image_parts(tmp_path: Path) -> None:
    blob = base64.b64encode(b"\x00" * 2048).decode()
    json_blob = base64.b64encode(b'{"a": 1}').decode()
    save = Saved(tmp_path)
    result = _result(
        {"type": "text", "text": "hello"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
        {
            "type": "resource",
            "resource": {"uri": "file:///p.png", "blob": PNG, "mimeType": "image/png"},
        },
        {
            "type": "resource",
            "resource": {"uri": "file:///j", "blob": json_blob, "mimeType": "application/json"},
        },
        {"type": "resource", "resource": {"uri": "file:///z.bin", "blob": blob}},
        {"type": "audio", "data": blob, "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///l", "name": "log", "mimeType": "text/plain"},
    )
    converted = convert_result("srv", "t", result, readable=True, save=save)
    assert converted.content == (
        TextContent(text="hello"),
        ImageContent(data=PNG, mime_type="image/png"),
        TextContent(text="inside"),
        ImageContent(data=PNG, mime_type="image/png"),
        TextContent(text='{"a": 1}'),
        TextContent(
            text=f"[binary resource file:///z.bin (unknown type, 2.0KB) saved to {save.files[0]}]"
        ),
        TextContent(text="[audio: audio/wav, 2.0KB, not shown]"),
        TextContent(
            text='[resource link file:///l "log" (text/plain) (read it with '
            "read_mcp_resource, server 'srv')]"
        ),
    )
    assert save.files[0].read_bytes() == b"\x00" * 2048 and save.files[0].suffix == ".bin"
    assert converted.details == {"server": "srv", "tool": "t"}
    assert converted.is_error is None
    assert converted.structured_content["content"][0] == {"type": "text", "text": "hello"}
    assert converted.structured_content["isError"] is False


def test_structured_content_alone_is_shown_as_json_and_kept_whole() -> None:
    converted = convert_result("s", "t", _result(structured={"b": 1}))
    assert converted.content == (TextContent(text='{\n  "b": 1\n}'),)
    assert converted.structured_content == {
        "content": [],
        "structuredContent": {"b": 1},
        "isError": False,
    }


def test_an_error_result_keeps_the_servers_content() -> None:
    converted = convert_result("s", "t", _result({"type": "text", "text": "bad"}, error=True))
    assert (converted.is_error, converted.content) == (True, (TextContent(text="bad"),))
    converted = convert_result("s", "t", _result(error=True))
    assert converted.content == (TextContent(text="MCP tool s/t reported an error"),)


def test_large_text_keeps_its_two_ends_and_saves_the_whole(tmp_path: Path) -> None:
    text = "\n".join(f"line {n:05d}" for n in range(5000))  # 55 KB
    save = Saved(tmp_path)
    parts, path = limit_parts(
        [TextContent(text=text), ImageContent(data=PNG, mime_type="image/png")], save
    )
    assert path == str(save.files[0]) and save.files[0].read_text() == text
    first, image = parts
    assert isinstance(first, TextContent) and isinstance(image, ImageContent)
    assert first.text.startswith("[MCP output cut in the middle: 53.7KB, 5000 lines, about ")
    assert first.text.endswith(f"[Full output: {path} (read it with offset and limit)]")
    assert "line 00000\n" in first.text and "line 04999" in first.text
    assert "line 02500" not in first.text
    assert len(cut_middle(text) or "") < 21 * 1024


def test_the_middle_cut_keeps_whole_characters_and_counts_what_it_removed() -> None:
    assert cut_middle("x" * 100) is None
    text = "é" * 30_000  # two bytes each: 5 bytes a side hold two
    assert cut_middle(text, max_bytes=10) == "éé\u202629996 chars truncated\u2026éé"
    # 3 bytes for the start (one é), 4 for the end (two).
    assert cut_middle("é" * 10, max_bytes=7) == "é\u20267 chars truncated\u2026éé"
