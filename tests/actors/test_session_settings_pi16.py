"""Settings keys pi 1.6.0 added that change a session: their checks and their effect.

Their effect on the first LLM request is also checked against real pi 1.6.0 by
``tests/interop/test_pi_cli_flags.py`` (the ``defaultTools`` and ``modelThinkingLevels`` cases).
"""

from __future__ import annotations

from pathlib import Path

import orjson

import pitrio
from pitrio.actors.session.resources.settings import validate_settings


def test_new_keys_are_checked_one_by_one() -> None:
    values = {
        "defaultThinkingLevel": "max",
        "modelThinkingLevels": {"a/b": "max", "c/d": "low"},
        "defaultTools": ["ls", "+grep"],
    }
    clean, problems = validate_settings(values, "settings.json")
    assert (clean, problems) == (values, ())
    bad = {"modelThinkingLevels": {"a/b": "huge"}, "defaultTools": "read", "defaultModel": "m"}
    clean, problems = validate_settings(bad, "settings.json")
    assert clean == {"defaultModel": "m"}  # the other keys stay
    assert sorted((p.key, p.error) for p in problems) == [
        ("defaultTools", "expected an array of strings"),
        (
            "modelThinkingLevels",
            '"a/b": expected one of off, minimal, low, medium, high, xhigh, max',
        ),
    ]


def test_http_settings_are_checked() -> None:
    good = {"httpProxy": "http://p:3128", "httpIdleTimeoutMs": "disabled"}
    good["websocketConnectTimeoutMs"] = 0
    assert validate_settings(good, "settings.json") == (good, ())
    bad = {"httpIdleTimeoutMs": "soon", "websocketConnectTimeoutMs": -1, "httpProxy": 3}
    clean, problems = validate_settings(bad, "settings.json")
    assert clean == {}
    wanted = 'expected a number of milliseconds (0 or "disabled": no limit)'
    assert sorted((p.key, p.error) for p in problems) == [
        ("httpIdleTimeoutMs", wanted),
        ("httpProxy", "expected a string"),
        ("websocketConnectTimeoutMs", wanted),
    ]


async def test_default_tools_and_model_thinking_levels_start_a_session(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    settings = {
        "defaultTools": ["ls", "read", "+grep"],
        "modelThinkingLevels": {"faux/faux-think": "low"},
    }
    (agent / "settings.json").write_bytes(orjson.dumps(settings))
    async with pitrio.create_session(
        cwd=str(tmp_path),
        model="faux/faux-think",
        persist=False,
        agent_dir=agent,
    ) as session:
        tools = await session.tools.active_tools()
        assert [tool.name for tool in tools] == ["ls", "read", "grep"]
        state = await session.loop.state()
        assert state.thinking_level == "low"
    # Without an entry for the model, defaultThinkingLevel (here pi's default, medium).
    (agent / "settings.json").write_bytes(orjson.dumps({"modelThinkingLevels": {"x/y": "low"}}))
    async with pitrio.create_session(
        cwd=str(tmp_path), model="faux/faux-think", persist=False, agent_dir=agent
    ) as session:
        assert (await session.loop.state()).thinking_level == "medium"
