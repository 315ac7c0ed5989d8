"""pi 1.6.0's ``sessionDir`` setting: where session files go when neither ``--session-dir``
nor ``$PITRIO_SESSION_DIR`` says (pi: the flag, ``PI_CODING_AGENT_SESSION_DIR``, the setting)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import pitrio
from pitrio.actors.session.resources.settings import Settings


def test_the_flag_then_the_variable_then_the_setting() -> None:
    settings = Settings({"sessionDir": "~/pi-sessions"})
    home = str(Path("~").expanduser())
    assert settings.session_dir_for("/work", None, env={}) == f"{home}/pi-sessions"
    assert settings.session_dir_for("/work", "/flag", env={}) == "/flag"
    variable = {"PITRIO_SESSION_DIR": "/from-env"}
    assert settings.session_dir_for("/work", None, env=variable) is None  # the store reads it
    relative = Settings({"sessionDir": "here/sessions"})
    assert relative.session_dir_for("/work", None, env={}) == "/work/here/sessions"
    assert Settings().session_dir_for("/work", None, env={}) is None


async def test_a_session_is_written_where_the_setting_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    (agent / "settings.json").write_bytes(orjson.dumps({"sessionDir": "kept-sessions"}))
    project = tmp_path / "proj"
    project.mkdir()
    async with pitrio.create_session(cwd=str(project), model="faux/echo") as session:
        await session.prompt("hello")
        await session.wait_for_idle()
        path = session.session_file
    assert path is not None and Path(path).parent == project / "kept-sessions"
    # --session-dir still wins over the setting.
    flagged = tmp_path / "flagged"
    async with pitrio.create_session(
        cwd=str(project), model="faux/echo", session_dir=str(flagged)
    ) as session:
        await session.prompt("hello")
        await session.wait_for_idle()
        path = session.session_file
    assert path is not None and Path(path).parent == flagged
