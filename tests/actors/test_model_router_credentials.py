"""Credentials: precedence, auth.json format and permissions, templates and !command values.

The precedence and value rules are pi 1.6.0's (observed against it by
``tests/interop/test_pi_config_values.py``); where 0.73.1 differed the test says so.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from pitrio.actors.model_router.auth_file import load_auth_file, save_api_key
from pitrio.actors.model_router.credentials import Credentials, redact
from pitrio.errors import AuthFileError, CredentialError


def write_auth(path: Path, document: object, mode: int = 0o600) -> Path:
    path.write_bytes(orjson.dumps(document))
    path.chmod(mode)
    return path


def creds(tmp_path: Path, env: dict[str, str] | None = None, **kwargs: object) -> Credentials:
    return Credentials(auth_path=tmp_path / "auth.json", env=env or {}, **kwargs)  # type: ignore[arg-type]


async def test_precedence_override_auth_models_json_env(tmp_path: Path) -> None:
    # pi 1.6.0: a models.json apiKey beats the provider's variable (0.73.1: the reverse).
    env = {"OPENAI_API_KEY": "env-key"}
    store = creds(tmp_path, env, provider_keys={"openai": "models-json-key"})
    assert await store.api_key("openai") == "models-json-key"
    assert await store.api_key("openai", override="cli-key") == "cli-key"
    assert await creds(tmp_path, env).api_key("openai") == "env-key"
    write_auth(tmp_path / "auth.json", {"openai": {"type": "api_key", "key": "auth-key"}})
    store.reload()
    assert await store.api_key("openai") == "auth-key"  # auth.json beats both


async def test_bare_variable_name_is_a_literal(tmp_path: Path) -> None:
    # 0.73.1 took a set variable's bare name as that variable; 1.6.0 sends the name itself.
    store = creds(tmp_path, {"MY_KEY": "from-env"}, provider_keys={"groq": "MY_KEY"})
    assert await store.api_key("groq") == "MY_KEY"


async def test_models_json_template_and_unresolved_variable(tmp_path: Path) -> None:
    env = {"ONE": "a", "TWO": "b", "EMPTY": ""}
    store = creds(
        tmp_path,
        env,
        provider_keys={"groq": "k-${ONE}.$TWO-$$-$!", "xai": "$NOPE", "mistral": "$EMPTY"},
    )
    assert await store.api_key("groq") == "k-a.b-$-!"
    assert store.configured("groq")
    # An unset (or empty) variable is an error; the provider's own variables are not tried.
    with_var = creds(tmp_path, {"XAI_API_KEY": "x"}, provider_keys={"xai": "$NOPE"})
    assert not with_var.configured("xai")
    with pytest.raises(CredentialError) as info:
        await with_var.api_key("xai")
    assert str(info.value) == (
        'Failed to resolve API key for provider "xai" from environment variable: NOPE '
        "(models.json providers.xai.apiKey)"
    )
    with pytest.raises(CredentialError, match="from environment variable: EMPTY"):
        await store.api_key("mistral")


async def test_auth_file_values_resolve_templates_and_commands(tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    write_auth(
        tmp_path / "auth.json",
        {
            "anthropic": {"type": "api_key", "key": "$SECRET_VAR"},
            "openai": {"type": "api_key", "key": f"!echo run >> {marker}; echo cmd-key"},
            "groq": {"type": "api_key", "key": "!!echo fresh"},
            "xai": {"type": "api_key", "key": "!exit 3"},
            "mistral": {"type": "api_key", "key": "$UNSET_VAR"},
        },
    )
    store = creds(tmp_path, {"SECRET_VAR": "var-key"})
    assert await store.api_key("anthropic") == "var-key"
    assert await store.api_key("openai") == "cmd-key"
    assert await store.api_key("openai") == "cmd-key"  # cached: ran once
    assert marker.read_text().count("run") == 1
    # 1.6.0 gives a second "!" no meaning: the shell is asked to run "!echo ...", which fails
    # (pitrio's "!!" ran the command for every request; models.json commands now do that).
    with pytest.raises(CredentialError, match="from shell command: !echo"):
        await store.api_key("groq")
    with pytest.raises(CredentialError) as info:
        await store.api_key("xai")
    assert str(info.value) == (
        'Failed to resolve API key for provider "xai" from shell command: exit 3 '
        f"({tmp_path / 'auth.json'} entry 'xai'): the key command of "
        f"{tmp_path / 'auth.json'} entry 'xai' failed with exit code 3; fix the entry's key "
        "or remove it to use XAI_API_KEY"
    )
    with pytest.raises(CredentialError, match="from environment variable: UNSET_VAR"):
        await store.api_key("mistral")
    # Every resolved value is redacted from texts that may echo it.
    assert store.redact("got var-key and cmd-key") == "got *** and ***"


async def test_models_json_commands_run_for_every_request(tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    store = creds(tmp_path, provider_keys={"groq": f"!echo run >> {marker}; echo k"})
    assert await store.api_key("groq") == "k"
    assert await store.api_key("groq") == "k"
    assert marker.read_text().count("run") == 2


async def test_auth_file_key_unresolved_falls_back_to_builtin_variables(tmp_path: Path) -> None:
    # pi 1.6.0: a built-in provider whose stored key does not resolve uses its own variable,
    # never models.json; another provider has no key at all.
    write_auth(
        tmp_path / "auth.json",
        {
            "anthropic": {"type": "api_key", "key": "$NOPE"},
            "local": {"type": "api_key", "key": "$NOPE"},
        },
    )
    env = {"ANTHROPIC_API_KEY": "env-key"}
    store = creds(tmp_path, env, provider_keys={"anthropic": "mj", "local": "mj"})
    assert await store.api_key("anthropic") == "env-key"
    assert store.configured("anthropic")
    assert not store.configured("local")
    with pytest.raises(CredentialError, match='provider "local" from environment variable: NOPE'):
        await store.api_key("local")


async def test_auth_file_env_object_and_optional_key(tmp_path: Path) -> None:
    write_auth(
        tmp_path / "auth.json",
        {
            "groq": {"type": "api_key", "key": "g-$VAR", "env": {"VAR": "scoped"}},
            "anthropic": {"type": "api_key", "env": {"ANTHROPIC_API_KEY": "not-a-key-source"}},
            "xai": {"type": "api_key", "key": "k", "env": {"HV": "from-entry"}},
        },
    )
    store = creds(tmp_path, {"VAR": "process", "ANTHROPIC_API_KEY": "process-key"})
    assert await store.api_key("groq") == "g-scoped"  # the entry's variables come first
    # Without a key the entry adds nothing; its env does not name the provider's variable.
    assert await store.api_key("anthropic") == "process-key"
    headers = await store.resolve_headers({"X-H": "$HV"}, "models.json providers.xai", "xai")
    assert headers == {"X-H": "from-entry"}
    assert store.env_for("xai")["HV"] == "from-entry"
    assert "HV" not in store.env_for("groq")
    bad = write_auth(tmp_path / "bad.json", {"groq": {"type": "api_key", "env": {"A": 1}}})
    with pytest.raises(AuthFileError, match="field 'env' must be an object of strings"):
        load_auth_file(bad)


async def test_headers_resolve_every_request_and_fail_when_unresolved(tmp_path: Path) -> None:
    store = creds(tmp_path, {"ONE": "a"})
    assert await store.resolve_headers({"X-A": "v-$ONE", "X-B": "lit"}, "o", "mock") == {
        "X-A": "v-a",
        "X-B": "lit",
    }
    with pytest.raises(CredentialError) as info:
        await store.resolve_headers({"X-Custom": "v-$NOPE"}, "models.json providers.mock", "mock")
    assert str(info.value) == (
        'Failed to resolve provider "mock" header "X-Custom" from environment variable: NOPE '
        "(models.json providers.mock header 'X-Custom')"
    )


async def test_missing_key_error_names_the_variables_not_secrets(tmp_path: Path) -> None:
    store = creds(tmp_path)
    with pytest.raises(CredentialError) as info:
        await store.api_key("anthropic")
    assert str(info.value) == (
        "No API key for provider anthropic: set ANTHROPIC_AUTH_TOKEN or ANTHROPIC_OAUTH_TOKEN "
        "or ANTHROPIC_API_KEY or add "
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
    # pi 1.6.0's wording for an unresolved value leads; then where, and why it cannot run.
    text = str(info.value)
    assert text.startswith('Failed to resolve API key for provider "openai" from shell command')
    assert (
        f"the key command of {tmp_path / 'auth.json'} entry 'openai' cannot run: The command "
        f"contains a NUL character (at offset {len(f'touch {marker}')}): the OS cannot take one"
    ) in text
    assert not marker.exists()


async def test_anthropic_auth_token_is_a_bearer_token_after_stored_keys(tmp_path: Path) -> None:
    env = {"ANTHROPIC_AUTH_TOKEN": "tok", "ANTHROPIC_API_KEY": "key"}
    store = creds(tmp_path, env)
    assert store.configured("anthropic")
    assert store.bearer_token("anthropic") == "tok"  # before the key variables, as pi 1.6.0
    assert await store.api_key("anthropic") == "key"  # never read as a key itself
    assert store.bearer_token("openai") is None
    write_auth(tmp_path / "auth.json", {"anthropic": {"type": "api_key", "key": "stored"}})
    stored = creds(tmp_path, env)
    assert stored.bearer_token("anthropic") is None  # a stored credential decides
    assert await stored.api_key("anthropic") == "stored"
    (tmp_path / "none").mkdir()
    token = creds(tmp_path / "none", {"ANTHROPIC_AUTH_TOKEN": "secret-token"})
    assert token.configured("anthropic")
    assert token.bearer_token("anthropic") == "secret-token"
    assert token.redact("echo secret-token") == "echo ***"  # a secret like a key
