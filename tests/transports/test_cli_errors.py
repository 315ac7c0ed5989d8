"""Errors of the ``pitrio`` command say what to do next (issue 24, item 2): real processes,
stderr by content."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson

TIMEOUT = 60
STORE = "postgresql://nobody@127.0.0.1:9/none"


def run(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes = b"",
    prelude: str = "",
) -> subprocess.CompletedProcess[bytes]:
    """The real command with HOME and the agent dir in ``tmp_path`` and no provider key from
    the machine; ``prelude`` is Python run first in the process (to hide a module)."""
    for name in ("home", "cwd", "agent"):
        (tmp_path / name).mkdir(exist_ok=True)
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PITRIO_") and not k.endswith(("_API_KEY", "_TOKEN"))
    }
    environment.update(HOME=str(tmp_path / "home"), PITRIO_AGENT_DIR=str(tmp_path / "agent"))
    environment.update(env or {})
    code = f"{prelude}\nimport sys\nfrom pitrio.transports.cli import main\nsys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tmp_path / "cwd",
        env=environment,
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


# -- models ----------------------------------------------------------------------------------


def test_an_unknown_model_suggests_the_nearest_and_the_listing(tmp_path: Path) -> None:
    result = run(tmp_path, "--model", "anthropic/claude-sonet-4-5", "-p", "hi")
    assert (result.returncode, result.stdout) == (1, b"")
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(
        "Error: Unknown model: anthropic/claude-sonet-4-5; did you mean anthropic/claude-sonnet-4-5"
    )
    assert line.endswith("(pitrio --list-models lists the models you can use)")


def test_an_unknown_model_in_rpc_mode_says_the_same_before_any_json(tmp_path: Path) -> None:
    result = run(tmp_path, "--mode", "rpc", "--model", "faux/ecoh", stdin=b"")
    assert (result.returncode, result.stdout) == (1, b"")
    [line] = result.stderr.decode().splitlines()
    assert line.startswith("Error: Unknown model: faux/ecoh; did you mean faux/echo")


def test_list_models_names_the_providers_hidden_for_lack_of_a_key(tmp_path: Path) -> None:
    result = run(tmp_path, "--list-models", "claude")
    assert (result.returncode, result.stderr) == (0, b"")
    lines = result.stdout.decode().splitlines()
    assert lines[0] == 'No models matching "claude"'
    assert lines[1].startswith("Hidden for lack of credentials: ")
    hidden = lines[1].removeprefix("Hidden for lack of credentials: ")
    # Each provider whose models match, with what would sign it in: a key variable, the
    # environment's credentials (AWS), a subscription login.
    assert (
        "anthropic (set ANTHROPIC_AUTH_TOKEN or ANTHROPIC_OAUTH_TOKEN or ANTHROPIC_API_KEY, "
        "or run pitrio login anthropic)" in hidden
    )
    assert (
        "amazon-bedrock (set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)" in hidden
    )
    assert "openrouter (set OPENROUTER_API_KEY)" in hidden
    assert "auth.json" not in hidden  # every one of them has a way named
    assert lines[1].endswith("pitrio --list-models --all lists every model")
    keyed = run(tmp_path, "--list-models", "claude", env={"ANTHROPIC_API_KEY": "k"})
    assert b"claude-sonnet-4-5" in keyed.stdout and b"Hidden" not in keyed.stdout


def test_list_models_all_lists_the_catalogue_saying_what_is_usable(tmp_path: Path) -> None:
    result = run(tmp_path, "--list-models", "claude-sonnet-4-5", "--all")
    assert (result.returncode, result.stderr) == (0, b"")
    lines = result.stdout.decode().splitlines()
    assert lines[0].split() == [
        "provider",
        "model",
        "context",
        "max-out",
        "thinking",
        "images",
        "usable",
    ]
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in lines[1:]}
    assert rows[("anthropic", "claude-sonnet-4-5")] == "no"
    keyed = run(
        tmp_path, "--list-models", "claude-sonnet-4-5", "--all", env={"ANTHROPIC_API_KEY": "k"}
    )
    # Columns are padded to the widest provider name of pi's catalogue (issue 25).
    [row] = [
        line
        for line in keyed.stdout.decode().splitlines()
        if line.split()[:2] == ["anthropic", "claude-sonnet-4-5"]
    ]
    assert row.endswith("yes")


# -- credentials and network -----------------------------------------------------------------


def test_a_missing_key_names_the_variable_and_the_auth_json_entry(tmp_path: Path) -> None:
    result = run(tmp_path, "--no-session", "--model", "anthropic/claude-sonnet-4-5", "-p", "hi")
    assert (result.returncode, result.stdout) == (1, b"")
    auth = tmp_path / "agent" / "auth.json"
    assert result.stderr.decode() == (
        "No API key for provider anthropic: set ANTHROPIC_AUTH_TOKEN or ANTHROPIC_OAUTH_TOKEN "
        "or ANTHROPIC_API_KEY or add "
        f'{{"anthropic": {{"type": "api_key", "key": "..."}}}} to {auth} (mode 600)\n'
    )
    # The entry as printed is one pitrio accepts.
    auth.write_text(json.dumps({"anthropic": {"type": "api_key", "key": "..."}}))
    auth.chmod(0o600)
    listed = run(tmp_path, "--list-models", "claude-sonnet-4-5")
    assert re.search(rb"^anthropic +claude-sonnet-4-5 ", listed.stdout, re.M), listed


def test_a_host_that_does_not_resolve_fails_at_once_with_its_name(tmp_path: Path) -> None:
    # Issue 24: a name lookup that failed was repeated (the SDKs' repeats, then the session's
    # auto-retry of "Connection error."), 15 s of silence; now one try and the cause.
    models = {
        "providers": {
            "far": {
                "baseUrl": "http://no-such-host.invalid/v1",
                "api": "openai-completions",
                "apiKey": "k",
                "models": [{"id": "m"}],
            }
        }
    }
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "models.json").write_bytes(orjson.dumps(models))
    result = run(tmp_path, "--mode", "json", "--model", "far/m", "hi")
    assert result.returncode == 0, result.stderr
    events = [orjson.loads(line) for line in result.stdout.splitlines()]
    kinds = [event["type"] for event in events]
    assert "auto_retry_start" not in kinds
    [failed] = [
        e["message"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ]
    assert failed["stopReason"] == "error"
    assert failed["errorMessage"].startswith("cannot reach no-such-host.invalid: ")
    printed = run(tmp_path, "--no-session", "--model", "far/m", "-p", "hi")
    assert printed.returncode == 1
    assert printed.stderr.decode().startswith("cannot reach no-such-host.invalid: ")


# -- optional extras -------------------------------------------------------------------------

NO_PSYCOPG = "import sys\nsys.modules['psycopg'] = None\nsys.modules['psycopg_pool'] = None"
"""Python run first: psycopg cannot be imported, as without the ``postgres`` extra."""

EXTRA = b"Error: the PostgreSQL store needs the postgres extra: pip install 'pitrio[postgres]'\n"


def test_serve_with_a_store_but_without_the_extra(tmp_path: Path) -> None:
    result = run(tmp_path, "serve", "--port", "0", "--store", STORE, prelude=NO_PSYCOPG)
    assert result.returncode == 1
    assert result.stderr.endswith(EXTRA), result.stderr
    assert b"Traceback" not in result.stderr


def test_db_and_sessions_transfer_without_the_extra(tmp_path: Path) -> None:
    for args in (
        ("db", "status", "--store", STORE),
        ("sessions", "export", "some-id", "--store", STORE),
    ):
        result = run(tmp_path, *args, prelude=NO_PSYCOPG)
        assert (result.returncode, result.stderr) == (1, EXTRA), args
