"""The settings pi 1.6.0 gives its built-in tools reach pitrio's too: ``shellPath`` and
``shellCommandPrefix`` the model's bash tool (not only ``!`` commands), ``images.autoResize``
the read tool."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from PIL import Image

import pitrio
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.content import ImageContent, TextContent


async def tool_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], call: FauxToolCall
) -> ToolResultMessage:
    """The result of the model's one tool call in a session with ``settings``."""
    agent = tmp_path / "agent"
    agent.mkdir(exist_ok=True)
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    (agent / "settings.json").write_bytes(orjson.dumps(settings))
    faux = FauxProvider([FauxReply(tool_calls=[call]), "done"])
    async with pitrio.create_session(
        cwd=str(tmp_path), model="faux/faux-1", faux=faux, persist=False
    ) as session:
        await session.prompt("go")
        await session.wait_for_idle()
        messages = await session.messages()
    [result] = [m for m in messages if isinstance(m, ToolResultMessage)]
    return result


async def test_the_bash_tool_runs_the_prefix_in_the_configured_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"shellPath": "/bin/sh", "shellCommandPrefix": "FOO=prefixed"}
    call = FauxToolCall("bash", {"command": 'echo "$0 $FOO"'})
    result = await tool_result(tmp_path, monkeypatch, settings, call)
    assert result.content == (TextContent(text="/bin/sh prefixed\n"),)


@pytest.mark.parametrize("resize, width", [(True, 2000), (False, 2400)])
async def test_the_read_tool_follows_images_auto_resize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resize: bool, width: int
) -> None:
    Image.new("RGB", (2400, 10), (10, 200, 30)).save(tmp_path / "wide.png")
    settings = {"images": {"autoResize": resize}}
    call = FauxToolCall("read", {"path": "wide.png"})
    result = await tool_result(tmp_path, monkeypatch, settings, call)
    [image] = [block for block in result.content if isinstance(block, ImageContent)]
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as decoded:
        assert decoded.width == width
