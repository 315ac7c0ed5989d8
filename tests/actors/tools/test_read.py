"""The read tool (spec §5.2) on real files: text, offset/limit, notices, errors, images."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from pitrio.actors.tool_executor.context import ToolCallContext, enter_call, leave_call
from pitrio.actors.tool_executor.tools import images
from pitrio.actors.tool_executor.tools import read as read_module
from pitrio.actors.tool_executor.tools.read import ReadSettings, create_read_tool, format_text
from pitrio.errors import ToolError
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.model import Model, ModelCost

from .support import run_one, text


async def read(tmp_path: Path, **args: object) -> tuple[str, object]:
    result, _ = await run_one(create_read_tool(str(tmp_path)), dict(args))
    return text(result), result.details


async def test_whole_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("Project notes\n- first item\n- second item\n")
    assert await read(tmp_path, path="notes.txt") == (
        "Project notes\n- first item\n- second item\n",
        None,
    )


async def test_offset_and_limit_as_in_the_fixture(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        'def greet(name):\n    return "Hi, " + name\n\n\nprint(greet("world"))\n'
    )
    body, details = await read(tmp_path, path="app.py", offset=1, limit=2)
    assert body == (
        'def greet(name):\n    return "Hi, " + name\n\n'
        "[4 more lines in file. Use offset=3 to continue.]"
    )
    assert details is None
    body, _ = await read(tmp_path, path="app.py", offset=5)
    assert body == 'print(greet("world"))\n'


async def test_offset_beyond_the_end(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb")
    with pytest.raises(ToolError, match=r"^Offset 5 is beyond end of file \(2 lines total\)$"):
        await read(tmp_path, path="f.txt", offset=5)


async def test_line_truncation_notice(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("\n".join(f"line {i}" for i in range(1, 2501)))
    body, details = await read(tmp_path, path="big.txt")
    assert body.endswith(
        "line 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
    )
    assert details["truncation"]["truncatedBy"] == "lines"  # type: ignore[index]
    body, _ = await read(tmp_path, path="big.txt", offset=2001)
    assert body.startswith("line 2001\n") and body.endswith("line 2500")


async def test_exactly_2000_lines_has_no_notice(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("\n".join("x" for _ in range(2000)))
    body, details = await read(tmp_path, path="f.txt")
    assert "[" not in body and details is None


async def test_byte_truncation_notice(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("\n".join("w" * 999 for _ in range(100)))
    body, _ = await read(tmp_path, path="wide.txt", offset=3)
    assert body.endswith(
        "\n\n[Showing lines 3-53 of 100 (50.0KB limit). Use offset=54 to continue.]"
    )


async def test_a_huge_first_line(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("short\n" + "m" * 60000 + "\nafter")
    body, details = await read(tmp_path, path="min.js", offset=2)
    assert body == (
        "[Line 2 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '2p' min.js | head -c 51200]"
    )
    assert details["truncation"]["firstLineExceedsLimit"] is True  # type: ignore[index]


@pytest.mark.parametrize(
    "size", [10, read_module.INLINE_READ_BYTES, read_module.INLINE_READ_BYTES + 1]
)
async def test_small_text_files_are_read_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # The same text either way; only a file over the inline limit costs a thread's round trip.
    line = "0123456789abcde\n"
    (tmp_path / "f.txt").write_text((line * (size // len(line) + 1))[:size])
    inline = await read(tmp_path, path="f.txt", limit=3000)
    hops = 0
    real = read_module.trio.to_thread.run_sync

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(read_module.trio.to_thread, "run_sync", counting)
    assert await read(tmp_path, path="f.txt", limit=3000) == inline
    assert hops == (1 if size > read_module.INLINE_READ_BYTES else 0)
    monkeypatch.setattr(read_module, "INLINE_READ_BYTES", -1)  # every read in a thread
    assert await read(tmp_path, path="f.txt", limit=3000) == inline


async def test_unreadable_and_special_files_take_the_thread_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_module.os, "access", lambda *_args: False)
    (tmp_path / "locked.txt").write_text("secret")
    with pytest.raises(ToolError, match=r"^EACCES: permission denied, access '.*locked.txt'$"):
        await read(tmp_path, path="locked.txt")
    assert read_module.read_small_text(str(tmp_path), "locked.txt", None, None) is None
    assert read_module.read_small_text(str(tmp_path), ".", None, None) is None  # a directory
    assert read_module.read_small_text(str(tmp_path), "missing", None, None) is None


def test_format_text_is_pure() -> None:
    assert format_text("a\nb\nc", "f", 2, 1) == (
        "b\n\n[1 more lines in file. Use offset=3 to continue.]",
        None,
    )
    assert format_text("a\nb\nc", "f", 0, None) == ("a\nb\nc", None)
    assert format_text("a\nb\nc", "f", -4, 10) == ("a\nb\nc", None)


async def test_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    with pytest.raises(ToolError) as caught:
        await read(tmp_path, path="missing.txt")
    assert str(caught.value) == f"ENOENT: no such file or directory, access '{missing}'"
    (tmp_path / "dir").mkdir()
    with pytest.raises(ToolError, match=r"^EISDIR: illegal operation on a directory, read$"):
        await read(tmp_path, path="dir")


async def test_path_rules(tmp_path: Path) -> None:
    (tmp_path / "it\u2019s here.txt").write_text("curly")
    assert (await read(tmp_path, path="@it's\u00a0here.txt"))[0] == "curly"
    assert (await read(tmp_path, path=str(tmp_path / "it\u2019s here.txt")))[0] == "curly"


def png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


async def test_small_image_is_sent_as_is(tmp_path: Path) -> None:
    data = png(4, 3)
    (tmp_path / "pic.dat").write_bytes(data)  # detected by content, not by name
    result, _ = await run_one(create_read_tool(str(tmp_path)), {"path": "pic.dat"})
    note, image = result.content
    assert note == TextContent(text="Read image file [image/png]")
    assert image == ImageContent(data=base64.b64encode(data).decode(), mime_type="image/png")


async def test_large_image_is_resized_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "big.png").write_bytes(png(4000, 1000))
    result, _ = await run_one(create_read_tool(str(tmp_path)), {"path": "big.png"})
    note, image = result.content
    assert isinstance(note, TextContent) and isinstance(image, ImageContent)
    assert note.text == (
        "Read image file [image/png]\n[Image: original 4000x1000, displayed at 2000x500. "
        "Multiply coordinates by 2.00 to map to original image.]"
    )
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (2000, 500)


async def test_without_an_image_library_images_pass_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "resizing_available", lambda: False)
    monkeypatch.setattr("pitrio.actors.tool_executor.tools.read.resizing_available", lambda: False)
    data = png(3000, 10)
    (tmp_path / "wide.png").write_bytes(data)
    result, _ = await run_one(create_read_tool(str(tmp_path)), {"path": "wide.png"})
    assert result.content[0] == TextContent(text="Read image file [image/png]")
    assert result.content[1] == ImageContent(
        data=base64.b64encode(data).decode(), mime_type="image/png"
    )


async def test_auto_resize_off(tmp_path: Path) -> None:
    data = png(3000, 10)
    (tmp_path / "wide.png").write_bytes(data)
    tool = create_read_tool(str(tmp_path), ReadSettings(auto_resize_images=False))
    result, _ = await run_one(tool, {"path": "wide.png"})
    assert result.content[1] == ImageContent(
        data=base64.b64encode(data).decode(), mime_type="image/png"
    )


async def test_undecodable_image_is_omitted(tmp_path: Path) -> None:
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(64))
    result, _ = await run_one(create_read_tool(str(tmp_path)), {"path": "broken.png"})
    assert text(result) == (
        "Read image file [image/png]\n"
        "[Image omitted: could not be resized below the inline image size limit.]"
    )


async def test_a_model_without_image_input_gets_a_note(tmp_path: Path) -> None:
    (tmp_path / "p.png").write_bytes(png(2, 2))
    model = Model(
        id="m", name="m", api="a", provider="p", base_url="", reasoning=False,
        input=("text",), cost=ModelCost(), context_window=1, max_tokens=1,
    )  # fmt: skip
    token = enter_call(ToolCallContext(tool_call_id="c", tool_name="read", model=model))
    try:
        result, _ = await run_one(create_read_tool(str(tmp_path)), {"path": "p.png"})
    finally:
        leave_call(token)
    assert text(result).endswith(
        "\n[Current model does not support images. The image will be omitted from this request.]"
    )


def test_image_detection() -> None:
    assert images.detect_image_mime(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert images.detect_image_mime(b"GIF89a...") == "image/gif"
    assert images.detect_image_mime(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert images.detect_image_mime(b"plain text") is None
    assert images.fit_within(4000, 3000) == (2000, 1500)
    assert images.fit_within(100, 5000) == (40, 2000)
