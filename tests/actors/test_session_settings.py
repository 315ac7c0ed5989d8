"""Settings: merge rules, migrations, validation, pi's dirs, atomic partial updates."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pitrio.actors.session.resources.settings import (
    Settings,
    SettingsProblem,
    SettingsWriteError,
    is_pi_agent_dir,
    load_settings,
    merge_settings,
    migrate_settings,
    project_config_dirs,
    update_global_settings,
    update_settings_file,
    validate_settings,
)
from pitrio.actors.supervisor.compaction import CompactionSettings
from pitrio.actors.supervisor.retry import RetrySettings


def write_json(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(value))
    return path


def test_merge_is_deep_and_project_wins() -> None:
    merged = merge_settings(
        {"retry": {"enabled": True, "maxRetries": 3}, "skills": ["a"], "theme": "dark"},
        {"retry": {"maxRetries": 1}, "skills": ["b"], "theme": None},
    )
    assert merged == {"retry": {"enabled": True, "maxRetries": 1}, "skills": ["b"], "theme": "dark"}
    # pi 1.6.0 merges at every depth: a project's override entry adds to the user's.
    merged = merge_settings(
        {"retry": {"provider": {"timeoutMs": 5, "maxRetries": 2}}},
        {"retry": {"provider": {"maxRetries": 0}}},
    )
    assert merged == {"retry": {"provider": {"timeoutMs": 5, "maxRetries": 0}}}


def test_migrations() -> None:
    assert migrate_settings({"queueMode": "all"}) == {"steeringMode": "all"}
    assert migrate_settings({"websockets": True}) == {"transport": "websocket"}
    assert migrate_settings({"websockets": False}) == {"transport": "sse"}
    assert migrate_settings(
        {"skills": {"enableSkillCommands": False, "customDirectories": ["~/my-skills"]}}
    ) == {"enableSkillCommands": False, "skills": ["~/my-skills"]}
    # A current skills list is left alone.
    assert migrate_settings({"skills": ["x"]}) == {"skills": ["x"]}


def test_load_reports_unparsable_files_and_uses_defaults(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write_json(agent / "settings.json", {"retry": {"baseDelayMs": 50}})
    project = tmp_path / "proj"
    (project / ".pitrio").mkdir(parents=True)
    (project / ".pitrio" / "settings.json").write_text("{not json")
    settings = load_settings(agent, str(project))
    assert settings.number("retry.baseDelayMs", 2000) == 50
    assert settings.number("retry.maxRetries", 3) == 3
    assert len(settings.problems) == 1
    problem = settings.problems[0]
    assert "invalid JSON" in problem.error and problem.key is None
    assert problem.path == str(project / ".pitrio" / "settings.json")


def test_wrong_types_are_reported_with_file_and_key(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    path = write_json(
        agent / "settings.json",
        {
            "retry": {"maxRetries": "3", "baseDelayMs": 10, "provider": {"timeoutMs": -1}},
            "compaction": True,
            "steeringMode": "sometimes",
            "skills": ["ok", 3],
            "thinkingBudgets": {"low": "many"},
            "someFutureKey": {"whatever": 1},
        },
    )
    settings = load_settings(agent)
    assert {(p.key, p.error) for p in settings.problems} == {
        ("compaction", "expected an object"),
        ("retry.maxRetries", "expected a number"),
        ("retry.provider.timeoutMs", "expected a number of at least 0"),
        ("steeringMode", 'expected one of "all", "one-at-a-time"'),
        ("skills", "expected an array of strings"),
        ("thinkingBudgets", '"low": expected a number of at least 0'),
    }
    assert all(p.path == str(path) for p in settings.problems)
    assert str(settings.problems[0]).startswith(f"{path}: ")
    # Bad values fall back to their defaults; good neighbours and unknown keys are kept.
    assert settings.retry == RetrySettings(max_retries=3, base_delay_ms=10)
    assert settings.compaction == CompactionSettings()
    assert settings.steering_mode == "one-at-a-time"
    assert settings.resource_entries("skills", "user") == ()
    assert settings.get("someFutureKey") == {"whatever": 1}


def test_validate_keeps_the_input_untouched() -> None:
    raw = {"retry": {"enabled": "yes", "maxRetries": 2}}
    clean, problems = validate_settings(raw, "f.json")
    assert clean == {"retry": {"maxRetries": 2}}
    assert problems == (SettingsProblem("f.json", "expected true or false", "retry.enabled"),)
    assert raw == {"retry": {"enabled": "yes", "maxRetries": 2}}


def test_typed_accessors_defaults() -> None:
    settings = Settings()
    assert settings.default_provider is None and settings.default_model is None
    assert settings.default_thinking_level is None
    assert settings.thinking_budgets == {}
    assert settings.transport == "auto"
    assert settings.steering_mode == settings.follow_up_mode == "one-at-a-time"
    assert settings.retry == RetrySettings()
    assert settings.compaction == CompactionSettings()
    assert settings.branch_summary.reserve_tokens == 16384
    assert settings.branch_summary.skip_prompt is False
    assert settings.shell_path is None and settings.shell_command_prefix is None
    assert settings.images_auto_resize is True and settings.images_block is False
    assert settings.enable_skill_commands is True
    assert settings.enabled_models is None
    assert settings.session_dir is None


def test_typed_accessors_read_the_merged_files(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write_json(
        agent / "settings.json",
        {
            "defaultProvider": "anthropic",
            "defaultModel": "claude-sonnet-4-5",
            "defaultThinkingLevel": "high",
            "thinkingBudgets": {"low": 1000, "high": 9000.0},
            "transport": "sse",
            "steeringMode": "all",
            "compaction": {"enabled": False, "keepRecentTokens": 1},
            "branchSummary": {"skipPrompt": True},
            "shellPath": "/bin/zsh",
            "images": {"autoResize": False, "blockImages": True},
            "enableSkillCommands": False,
            "enabledModels": ["anthropic/*"],
            "sessionDir": "~/sessions",
            "prompts": ["../shared-prompts"],
        },
    )
    project = tmp_path / "proj"
    write_json(
        project / ".pitrio" / "settings.json",
        {"followUpMode": "all", "shellCommandPrefix": "set -e", "prompts": ["local"]},
    )
    s = load_settings(agent, str(project))
    assert s.problems == ()
    assert (s.default_provider, s.default_model, s.default_thinking_level) == (
        "anthropic",
        "claude-sonnet-4-5",
        "high",
    )
    assert s.thinking_budgets == {"low": 1000, "high": 9000}
    assert s.transport == "sse"
    assert (s.steering_mode, s.follow_up_mode) == ("all", "all")
    assert s.compaction == CompactionSettings(enabled=False, keep_recent_tokens=1)
    assert s.branch_summary.skip_prompt is True
    assert (s.shell_path, s.shell_command_prefix) == ("/bin/zsh", "set -e")
    assert (s.images_auto_resize, s.images_block) == (False, True)
    assert s.enable_skill_commands is False
    assert s.enabled_models == ("anthropic/*",)
    assert s.session_dir == str(Path("~/sessions").expanduser())
    # Resource lists are kept per file (each resolves against its own directory).
    assert s.resource_entries("prompts", "user") == ("../shared-prompts",)
    assert s.resource_entries("prompts", "project") == ("local",)
    assert s.get("prompts") == ["local"]


def test_pi_project_dir_is_read_only_when_pointed_at_pi(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write_json(project / ".pi" / "settings.json", {"steeringMode": "all"})
    pi_agent = tmp_path / "home" / ".pi" / "agent"
    own_agent = tmp_path / "home" / ".pitrio" / "agent"
    assert is_pi_agent_dir(pi_agent) and not is_pi_agent_dir(own_agent)

    assert load_settings(pi_agent, str(project)).steering_mode == "all"
    assert load_settings(own_agent, str(project)).steering_mode == "one-at-a-time"
    assert load_settings(own_agent, str(project), pi_compat=True).steering_mode == "all"
    assert load_settings(pi_agent, str(project), pi_compat=False).steering_mode == "one-at-a-time"
    assert project_config_dirs(str(project), pi_agent) == (project / ".pitrio", project / ".pi")

    # A .pitrio file, when there is one, is the project's file.
    write_json(project / ".pitrio" / "settings.json", {"followUpMode": "all"})
    settings = load_settings(pi_agent, str(project))
    assert settings.project_path == project / ".pitrio" / "settings.json"
    assert (settings.steering_mode, settings.follow_up_mode) == ("one-at-a-time", "all")


def test_update_keeps_other_keys(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"theme": "dark", "retry": {"maxRetries": 2}}')
    update_global_settings(tmp_path, {"retry.enabled": False, "steeringMode": "all"})
    assert orjson.loads((tmp_path / "settings.json").read_bytes()) == {
        "theme": "dark",
        "retry": {"maxRetries": 2, "enabled": False},
        "steeringMode": "all",
    }
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_update_creates_the_file_and_its_directory(tmp_path: Path) -> None:
    agent = tmp_path / "new" / "agent"
    written = update_global_settings(agent, {"defaultThinkingLevel": "low"})
    assert written == {"defaultThinkingLevel": "low"}
    assert load_settings(agent).default_thinking_level == "low"


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2]", b'{"retry": {"maxRetries": "many"}}', b'{"retry": 5}'],
)
def test_an_invalid_file_is_never_overwritten(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(content)
    with pytest.raises(SettingsWriteError) as caught:
        update_global_settings(tmp_path, {"steeringMode": "all"})
    assert str(path) in str(caught.value)
    assert caught.value.problems
    assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_a_change_that_would_make_the_file_invalid_is_refused(tmp_path: Path) -> None:
    path = write_json(tmp_path / "settings.json", {"theme": "dark"})
    before = path.read_bytes()
    with pytest.raises(SettingsWriteError, match=r"retry\.maxRetries: expected a number"):
        update_settings_file(path, {"retry.maxRetries": "three"})
    assert path.read_bytes() == before


def test_a_setting_written_back_round_trips(tmp_path: Path) -> None:
    update_global_settings(tmp_path, {"compaction.enabled": False})
    update_global_settings(tmp_path, {"compaction.reserveTokens": 1000})
    settings = load_settings(tmp_path)
    assert settings.compaction == CompactionSettings(enabled=False, reserve_tokens=1000)


def test_session_fsync_policy(tmp_path: Path) -> None:
    from pitrio.actors.session.bootstrap import store_options

    agent = tmp_path / "agent"
    assert store_options(load_settings(agent)).fsync == "always"  # the default
    project = tmp_path / "proj"
    write_json(project / ".pitrio" / "settings.json", {"session": {"fsync": "batch"}})
    assert store_options(load_settings(agent, str(project))).fsync == "batch"
    write_json(agent / "settings.json", {"session": {"fsync": "sometimes"}})
    settings = load_settings(agent)
    assert [(p.key, p.error) for p in settings.problems] == [
        ("session.fsync", 'expected one of "always", "batch", "never"')
    ]
    assert store_options(settings).fsync == "always"
