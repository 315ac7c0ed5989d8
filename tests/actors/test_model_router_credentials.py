"""Credentials: precedence, auth.json format and permissions, $ENV and !command values."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from pitrio.actors.model_router.credentials import (
    Credentials,
    load_auth_file,
    parse_value,
    redact,
    save_api_key,
)
from pitrio.errors import AuthFileError, CredentialError


def write_auth(path: Path, document: object, mode: int = 0o600) -> Path:
    path.write_bytes(orjson.dumps(document))
    path.chmod(mode)
    return path


def creds(tmp_path: Path, env: dict[str, str] | None = None, **kwargs: object) -> Credentials:
    return Credentials(auth_path=tmp_path / "auth.json", env=env or {}, **kwargs)  # type: ignore[arg-type]


def test_value_forms() -> None:
    env = {"MY_KEY": "from-env"}
    assert parse_value("!op read x", env, "o").kind == "command"
    assert parse_value("!!cat token", env, "o").kind == "command-fresh"
    assert parse_value("$MY_KEY", env, "o") == parse_value("${MY_KEY}", env, "o")
    assert parse_value("$MY_KEY", env, "o").value == "MY_KEY"
    assert parse_value("MY_KEY", env, "o").kind == "env"  # pi: a set variable's bare name
    assert parse_value("OTHER_KEY", env, "o").kind == "literal"  # unset: a literal key
    assert parse_value("sk-abc", env, "o").kind == "literal"


async def test_precedence_override_auth_env_models_json(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "env-key"}
    store = creds(tmp_path, env, provider_keys={"openai": "models-json-key"})
    assert await store.api_key("openai") == "env-key"
    assert await store.api_key("openai", override="cli-key") == "cli-key"
    write_auth(tmp_path / "auth.json", {"openai": {"type": "api_key", "key": "auth-key"}})
    store.reload()
    assert await store.api_key("openai") == "auth-key"  # auth.json beats the environment
    no_env = creds(tmp_path, {}, provider_keys={"groq": "models-json-key"})
    assert await no_env.api_key("groq") == "models-json-key"


async def test_auth_file_values_resolve_env_and_commands(tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    write_auth(
        tmp_path / "auth.json",
        {
            "anthropic": {"type": "api_key", "key": "$SECRET_VAR"},
            "openai": {"type": "api_key", "key": f"!echo run >> {marker}; echo cmd-key"},
            "groq": {"type": "api_key", "key": f"!!echo run >> {marker}; echo fresh"},
            "xai": {"type": "api_key", "key": "!exit 3"},
            "mistral": {"type": "api_key", "key": "$UNSET_VAR"},
        },
    )
    store = creds(tmp_path, {"SECRET_VAR": "var-key"})
    assert await store.api_key("anthropic") == "var-key"
    assert await store.api_key("openai") == "cmd-key"
    assert await store.api_key("openai") == "cmd-key"  # cached: ran once
    assert await store.api_key("groq") == "fresh"
    assert await store.api_key("groq") == "fresh"  # !! runs every time
    assert marker.read_text().count("run") == 3
    with pytest.raises(CredentialError, match="failed with exit code 3") as info:
        await store.api_key("xai")
    assert str(info.value) == (
        f"The key command of {tmp_path / 'auth.json'} entry 'xai' failed with exit code 3"
    )
    with pytest.raises(CredentialError, match="Environment variable UNSET_VAR"):
        await store.api_key("mistral")
    # Every resolved value is redacted from texts that may echo it.
    assert store.redact("got var-key and cmd-key") == "got *** and ***"


async def test_missing_key_error_names_the_variables_not_secrets(tmp_path: Path) -> None:
    store = creds(tmp_path)
    with pytest.raises(CredentialError) as info:
        await store.api_key("anthropic")
    assert str(info.value) == (
        "No API key for provider anthropic: set ANTHROPIC_OAUTH_TOKEN or ANTHROPIC_API_KEY or add "
        '{"anthropic": {"type": "api_key", "key": "..."}} to '
        f"{tmp_path / 'auth.json'} (mode 600)"
    )
    keyless = creds(tmp_path, keyless={"ollama"})
    assert await keyless.api_key("ollama") is None
    assert keyless.configured("ollama") and not keyless.configured("anthropic")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660])
async def test_auth_file_accessible_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = write_auth(tmp_path / "auth.json", {"openai": {"type": "api_key", "key": "k"}}, mode)
    with pytest.raises(AuthFileError) as info:
        load_auth_file(path)
    assert str(info.value) == (
        f"{path} is accessible by group/others (mode {mode:o}); pitrio will not read "
        f"credentials from it. Fix it with: chmod 600 {path}"
    )
    store = creds(tmp_path, {"OPENAI_API_KEY": "env"})
    with pytest.raises(AuthFileError):
        await store.api_key("openai")  # refused, not silently skipped
    assert store.problem == str(info.value)
    assert not store.configured("anthropic")


def test_malformed_auth_file_never_quotes_its_content(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text('{"openai": {"type": "api_key", "key": "sk-secret-value"')
    path.chmod(0o600)
    with pytest.raises(AuthFileError) as info:
        load_auth_file(path)
    assert str(info.value) == f"{path}: invalid JSON"
    write_auth(path, {"openai": {"type": "password", "key": "sk-secret-value"}})
    with pytest.raises(AuthFileError, match="field 'type' must be api_key or oauth") as info:
        load_auth_file(path)
    assert "sk-secret-value" not in str(info.value)


async def test_oauth_entries(tmp_path: Path) -> None:
    write_auth(
        tmp_path / "auth.json",
        {
            "anthropic": {"type": "oauth", "access": "tok", "refresh": "r", "expires": 2**62},
            "openai": {"type": "oauth", "access": "old", "refresh": "r", "expires": 1},
        },
    )
    store = creds(tmp_path)
    assert await store.api_key("anthropic") == "tok"
    with pytest.raises(CredentialError, match="has expired"):
        await store.api_key("openai")


def test_save_api_key_creates_0600_and_keeps_other_entries(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "auth.json"
    save_api_key(path, "openai", "sk-one")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    save_api_key(path, "anthropic", "sk-two")
    assert orjson.loads(path.read_bytes()) == {
        "openai": {"type": "api_key", "key": "sk-one"},
        "anthropic": {"type": "api_key", "key": "sk-two"},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["auth.json"]  # no temp file left
    os.chmod(path, 0o644)
    with pytest.raises(AuthFileError):
        save_api_key(path, "groq", "sk-three")


def test_redact() -> None:
    assert redact("key sk-abc123 and sk-abc123456", ["sk-abc123", "sk-abc123456"]) == (
        "key *** and ***"
    )
    assert redact("short ab", ["ab"]) == "short ab"  # too short to redact safely


async def test_a_key_command_the_os_cannot_take_is_a_credential_error(tmp_path: Path) -> None:
    """Issue 36: a NUL in a key command (JSON writes it as an escape) used to escape as a
    bare ValueError from the spawn; now it is refused, naming the entry, and nothing runs."""
    marker = tmp_path / "runs"
    write_auth(
        tmp_path / "auth.json",
        {"openai": {"type": "api_key", "key": f"!touch {marker}\u0000; echo key"}},
    )
    store = creds(tmp_path)
    with pytest.raises(CredentialError) as info:
        await store.api_key("openai")
    assert str(info.value) == (
        f"The key command of {tmp_path / 'auth.json'} entry 'openai' cannot run: The command "
        f"contains a NUL character (at offset {len(f'touch {marker}')}): the OS cannot take one"
    )
    assert not marker.exists()
