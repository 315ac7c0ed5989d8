"""Settings and flags of pi 1.6.0 that ``docs/pi-1.6-surface.md`` calls the same, checked on
a session: ``shellPath`` and ``shellCommandPrefix`` reach the model's bash tool (not only
``!`` commands), ``images.autoResize`` the read tool; ``--no-extensions`` stops discovery
only."""

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


@pytest.mark.parametrize("no_extensions", [False, True])
async def test_no_extensions_skips_discovery_but_not_explicit_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_extensions: bool
) -> None:
    # pi's --no-extensions/-ne: the agent dir's extensions are not discovered; -e ones load.
    agent = tmp_path / "agent"
    (agent / "extensions").mkdir(parents=True)
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    source = "def setup(api):\n    api.register_command('{name}', lambda args, ctx: None)\n"
    (agent / "extensions" / "found.py").write_text(source.format(name="found"))
    (tmp_path / "given.py").write_text(source.format(name="given"))
    async with pitrio.create_session(
        cwd=str(tmp_path),
        model="faux/faux-1",
        persist=False,
        extensions=[str(tmp_path / "given.py")],
        no_extensions=no_extensions,
    ) as session:
        names = sorted(c["name"] for c in await session.handle.commands())
    assert names == (["given"] if no_extensions else ["found", "given"])


SESSION_ECHO = 'echo "$PI_SESSION_ID|$PI_SESSION_FILE|$PI_PROVIDER/$PI_MODEL|$PI_REASONING_LEVEL"'


@pytest.mark.parametrize("persist", [True, False])
async def test_bash_commands_see_the_session_as_pi_describes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, persist: bool
) -> None:
    # pi 1.6.0's docs/environment-variables.md: read when each command starts; a parent
    # pi's values do not leak in; no file, no PI_SESSION_FILE.
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("PI_SESSION_FILE", "/a/parent/session.jsonl")
    call = FauxToolCall("bash", {"command": SESSION_ECHO})
    faux = FauxProvider([FauxReply(tool_calls=[call]), "one", FauxReply(tool_calls=[call]), "two"])
    async with pitrio.create_session(
        cwd=str(tmp_path),
        model="faux/faux-think:low",
        faux=faux,
        persist=persist,
        session_dir=str(tmp_path / "sessions"),
    ) as session:
        await session.prompt("first")
        await session.wait_for_idle()
        await session.set_model("faux", "faux-1")
        await session.prompt("second")
        await session.wait_for_idle()
        messages = await session.messages()
        session_id, path = session.header.id, session.session_file
    first, second = [m.content[0].text for m in messages if isinstance(m, ToolResultMessage)]
    file = str(path) if persist else ""
    assert first == f"{session_id}|{file}|faux/faux-think|low\n"
    assert second == f"{session_id}|{file}|faux/faux-1|off\n"
