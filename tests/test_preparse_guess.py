"""The launcher's guess of the resumed session file follows a ``sessionDir`` setting as the
runtime's settings do (pitrio._preparse_guess)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest

from pitrio._preparse_guess import SETTINGS_MAX, named_session, setting_session_dir
from pitrio.actors.session.resources.settings import load_settings
from pitrio.actors.session_store.paths import session_dir

CONTINUE = ["--mode", "rpc", "--continue"]


def write_settings(path: Path, values: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(values if isinstance(values, bytes) else orjson.dumps(values))


def session_in(folder: Path, name: str = "2026-12-06T10-00-00-000Z_s-1.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b'{"type":"session","version":3,"id":"s-1","timestamp":"t","cwd":"/p"}\n')
    return path


def runtime_folder(agent: Path, cwd: Path, env: dict[str, str], flag: str | None = None) -> Path:
    """Where the runtime opens the cwd's sessions: its settings, then the store's default (a
    relative folder is the process's cwd's, the project's here)."""
    chosen = load_settings(agent, str(cwd)).session_dir_for(str(cwd), flag, env)
    return cwd / session_dir(str(cwd), override=chosen, env=env)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    agent, cwd = tmp_path / "agent", tmp_path / "project"
    cwd.mkdir()
    return agent, cwd, {"PITRIO_AGENT_DIR": str(agent)}


def test_a_global_setting_names_the_folder(places: tuple[Path, Path, dict[str, str]]) -> None:
    agent, cwd, env = places
    write_settings(agent / "settings.json", {"sessionDir": "kept/sessions"})
    expected = session_in(cwd / "kept" / "sessions")
    session_in(session_dir(str(cwd), env=env))  # the default folder, which must not be chosen
    assert runtime_folder(agent, cwd, env) == expected.parent
    assert named_session(CONTINUE, str(cwd), env) == str(expected)


def test_the_projects_setting_is_over_the_global_one(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    agent, cwd, env = places
    elsewhere = cwd.parent / "absolute"
    write_settings(agent / "settings.json", {"sessionDir": "global"})
    write_settings(cwd / ".pitrio" / "settings.json", {"sessionDir": str(elsewhere)})
    session_in(cwd / "global")
    expected = session_in(elsewhere)
    assert runtime_folder(agent, cwd, env) == elsewhere
    assert named_session(CONTINUE, str(cwd), env) == str(expected)


def test_pis_agent_dir_reads_the_pi_project_file(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "home" / ".pi" / "agent", tmp_path / "project"
    cwd.mkdir()
    env = {"PITRIO_AGENT_DIR": str(agent)}
    write_settings(cwd / ".pi" / "settings.json", {"sessionDir": "from-pi"})
    expected = session_in(cwd / "from-pi")
    assert runtime_folder(agent, cwd, env) == expected.parent
    assert named_session(CONTINUE, str(cwd), env) == str(expected)
    # With pitrio's own agent dir, the .pi project file is not read: the default folder.
    other = tmp_path / "agent"
    assert setting_session_dir(str(other), str(cwd)) is None
    assert runtime_folder(other, cwd, {"PITRIO_AGENT_DIR": str(other)}) == Path(
        session_dir(str(cwd), env={"PITRIO_AGENT_DIR": str(other)})
    )


@pytest.mark.parametrize(
    "content",
    [b"{not json", orjson.dumps({"sessionDir": 3}), orjson.dumps({"sessionDir": ""}), b"[1]"],
    ids=["not-json", "a-number", "empty", "not-an-object"],
)
def test_a_setting_that_is_not_a_folder_leaves_the_default(
    places: tuple[Path, Path, dict[str, str]], content: bytes
) -> None:
    agent, cwd, env = places
    write_settings(agent / "settings.json", content)
    expected = session_in(session_dir(str(cwd), env=env))
    assert runtime_folder(agent, cwd, env) == expected.parent
    assert named_session(CONTINUE, str(cwd), env) == str(expected)


def test_the_flag_and_the_variable_are_over_the_setting(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    agent, cwd, env = places
    write_settings(agent / "settings.json", {"sessionDir": "setting"})
    session_in(cwd / "setting")
    flagged = session_in(cwd / "flagged")
    assert runtime_folder(agent, cwd, env, flag="flagged") == flagged.parent
    assert named_session([*CONTINUE, "--session-dir", "flagged"], str(cwd), env) == str(flagged)
    variable = {**env, "PITRIO_SESSION_DIR": str(cwd / "variable")}
    chosen = session_in(cwd / "variable")
    assert runtime_folder(agent, cwd, variable) == chosen.parent
    assert named_session(CONTINUE, str(cwd), variable) == str(chosen)


def test_a_session_id_prefix_is_looked_for_in_the_settings_folder(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    agent, cwd, env = places
    write_settings(agent / "settings.json", {"sessionDir": "kept"})
    expected = session_in(cwd / "kept", "2026-12-06T10-00-00-000Z_abcd1234.jsonl")
    argv = ["--mode", "rpc", "--session", "abcd"]
    assert named_session(argv, str(cwd), env) == str(expected)
    os.remove(expected)
    assert named_session(argv, str(cwd), env) is None


def test_a_settings_file_that_is_not_a_regular_file_does_not_hold_the_start(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    # A FIFO named settings.json (no writer) would block a plain open; a directory cannot be
    # read. The guess reads neither and takes the default folder.
    agent, cwd, env = places
    agent.mkdir()
    os.mkfifo(agent / "settings.json")
    (cwd / ".pitrio" / "settings.json").mkdir(parents=True)
    expected = session_in(session_dir(str(cwd), env=env))
    found: list[str | None] = []
    worker = threading.Thread(
        target=lambda: found.append(named_session(CONTINUE, str(cwd), env)), daemon=True
    )
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and found == [str(expected)]


def test_a_settings_file_past_the_bound_is_not_read(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    agent, cwd, env = places
    padded = b'{"sessionDir": "kept"' + b" " * SETTINGS_MAX + b"}"
    write_settings(agent / "settings.json", padded)
    expected = session_in(session_dir(str(cwd), env=env))
    session_in(cwd / "kept")
    assert named_session(CONTINUE, str(cwd), env) == str(expected)
