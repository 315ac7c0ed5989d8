"""pi 1.6.0's ``images.blockImages``: no image reaches a model; each is replaced by the text
"Image reading is disabled." (a run of them kept once), in user turns and tool results."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import orjson
import pytest
from PIL import Image

import pitrio
from pitrio.actors.model_router import FauxProvider
from pitrio.messages.agent import ToolResultMessage, UserMessage
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.convert import IMAGES_BLOCKED, PrefixConverter, without_images


def png() -> ImageContent:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (0, 128, 255)).save(buffer, format="PNG")
    return ImageContent(data=base64.b64encode(buffer.getvalue()).decode(), mime_type="image/png")


def test_images_become_one_text_per_run() -> None:
    image = png()
    user = UserMessage(
        content=(TextContent(text="see"), image, image, TextContent(text="and"), image),
        timestamp=1,
    )
    assert without_images(user).content == (
        TextContent(text="see"),
        TextContent(text=IMAGES_BLOCKED),
        TextContent(text="and"),
        TextContent(text=IMAGES_BLOCKED),
    )
    result = ToolResultMessage(
        tool_call_id="c", tool_name="read", content=(image,), is_error=False, timestamp=2
    )
    assert without_images(result).content == (TextContent(text=IMAGES_BLOCKED),)
    plain = UserMessage(content="text only", timestamp=3)
    assert without_images(plain) is plain  # untouched messages are the same objects


def test_the_converter_blocks_only_when_asked() -> None:
    message = UserMessage(content=(png(),), timestamp=1)
    assert PrefixConverter().convert([message])[0] is message
    blocked = PrefixConverter(block_images=True).convert([message])
    assert blocked[0].content == (TextContent(text=IMAGES_BLOCKED),)


@pytest.mark.parametrize("block", [True, False])
async def test_a_prompts_image_reaches_the_model_only_when_not_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: bool
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    (agent / "settings.json").write_bytes(orjson.dumps({"images": {"blockImages": block}}))
    faux = FauxProvider(["seen"])
    async with pitrio.create_session(
        cwd=str(tmp_path), model="faux/echo", faux=faux, persist=False
    ) as session:
        await session.prompt("what is this?", images=[png()])
        await session.wait_for_idle()
        messages = await session.messages()
    sent = faux.last_request.context.messages[-1]
    kinds = [type(block).__name__ for block in sent.content]
    if block:
        assert kinds == ["TextContent", "TextContent"]
        assert sent.content[1] == TextContent(text=IMAGES_BLOCKED)
    else:
        assert kinds == ["TextContent", "ImageContent"]
    # The session keeps the image either way: only the request goes without it.
    user = next(m for m in messages if isinstance(m, UserMessage))
    assert any(isinstance(block, ImageContent) for block in user.content)
