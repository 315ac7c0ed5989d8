"""Settings: merge rules, migrations, problems reported, atomic partial updates."""

from __future__ import annotations

from pathlib import Path

import orjson

from pitrio.actors.session.resources.settings import (
    Settings,
    load_settings,
    merge_settings,
    migrate_settings,
    update_global_settings,
)


def test_merge_is_one_level_deep_and_project_wins() -> None:
    merged = merge_settings(
        {"retry": {"enabled": True, "maxRetries": 3}, "skills": ["a"], "theme": "dark"},
        {"retry": {"maxRetries": 1}, "skills": ["b"], "theme": None},
    )
    assert merged == {"retry": {"enabled": True, "maxRetries": 1}, "skills": ["b"], "theme": "dark"}


def test_migrations() -> None:
    assert migrate_settings({"queueMode": "all"}) == {"steeringMode": "all"}
    assert migrate_settings({"websockets": True}) == {"transport": "websocket"}


def test_load_reports_bad_files(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text('{"retry": {"baseDelayMs": 50}}')
    project = tmp_path / "proj"
    (project / ".pitrio").mkdir(parents=True)
    (project / ".pitrio" / "settings.json").write_text("{not json")
    settings = load_settings(agent, str(project))
    assert settings.number("retry.baseDelayMs", 2000) == 50
    assert settings.number("retry.maxRetries", 3) == 3
    assert len(settings.problems) == 1 and "invalid JSON" in settings.problems[0].error


def test_typed_accessors_fall_back_on_bad_types() -> None:
    settings = Settings({"a": {"n": "7", "f": 1, "t": 3}})
    assert settings.number("a.n", 5) == 5
    assert settings.flag("a.f", True) is True
    assert settings.text("a.t") is None
    assert settings.get("a.missing.deeper", "d") == "d"


def test_update_keeps_other_keys(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"theme": "dark", "retry": {"maxRetries": 2}}')
    update_global_settings(tmp_path, {"retry.enabled": False, "steeringMode": "all"})
    assert orjson.loads((tmp_path / "settings.json").read_bytes()) == {
        "theme": "dark",
        "retry": {"maxRetries": 2, "enabled": False},
        "steeringMode": "all",
    }
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
