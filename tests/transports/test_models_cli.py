"""``pitrio --list-models``: the table of usable models."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson

from pitrio.actors.model_router.catalogue import CATALOGUE
from pitrio.transports.models_cli import (
    format_token_count,
    fuzzy_match,
    list_models_command,
)


def run(tmp_path: Path, search: str | None, **env: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = list_models_command(
        search, env={"PITRIO_AGENT_DIR": str(tmp_path), **env}, stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


def test_format_token_count() -> None:
    assert [format_token_count(n) for n in (999, 1000, 16384, 200000, 1000000, 1048576)] == [
        "999",
        "1K",
        "16.4K",
        "200K",
        "1M",
        "1.0M",
    ]


def test_fuzzy_match() -> None:
    assert fuzzy_match("son45", "anthropic claude-sonnet-4-5")
    assert fuzzy_match("ANTH haiku", "anthropic claude-haiku-4-5")
    assert not fuzzy_match("haiku opus", "anthropic claude-haiku-4-5")


def test_lists_only_usable_models_sorted(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, None, ANTHROPIC_API_KEY="k")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["provider", "model", "context", "max-out", "thinking", "images"]
    providers = [line.split()[0] for line in lines[1:]]
    assert set(providers) == {"anthropic", "faux"}
    assert providers == sorted(providers)
    haiku = next(line for line in lines if "claude-haiku-4-5" in line)
    assert haiku.split() == ["anthropic", "claude-haiku-4-5", "200K", "64K", "yes", "yes"]
    assert len({len(line) for line in lines}) == 1  # every cell padded: aligned columns


def test_search_and_no_match(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, "son45", ANTHROPIC_API_KEY="k")
    # pi's catalogue (issue 25) has several matches: exactly the anthropic ids that fit.
    expected = sorted(
        m.id
        for m in CATALOGUE
        if m.provider == "anthropic" and fuzzy_match("son45", f"anthropic {m.id}")
    )
    assert [line.split()[1] for line in out.splitlines()[1:]] == expected
    assert "claude-sonnet-4-5" in expected
    _, out, _ = run(tmp_path, "zzz")
    assert out == 'No models matching "zzz"\n'


def test_problems_go_to_stderr_and_custom_models_are_listed(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_bytes(
        orjson.dumps(
            {
                "providers": {
                    "ollama": {
                        "baseUrl": "http://localhost:11434/v1",
                        "api": "openai-completions",
                        "models": [{"id": "llama3.1:8b", "contextWindow": 8192}],
                    }
                }
            }
        )
    )
    _, out, _ = run(tmp_path, "ollama")
    assert out.splitlines()[1].split() == ["ollama", "llama3.1:8b", "8.2K", "16.4K", "no", "no"]
    (tmp_path / "models.json").write_text("{broken")
    code, out, err = run(tmp_path, None)
    assert code == 0
    assert err.startswith(f"Warning: {tmp_path / 'models.json'}: (top level): invalid JSON")


# -- issue 25: the whole catalogue, as a real process ---------------------------------------


def _list_models(tmp_path: Path, *args: str, env: dict[str, str]) -> list[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PITRIO_") and not k.endswith(("_API_KEY", "_TOKEN"))
    }
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS"):
        environment.pop(name, None)
    environment.update(HOME=str(home), PITRIO_AGENT_DIR=str(tmp_path / "agent"), **env)
    done = subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", "--list-models", *args],
        env=environment,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert done.stderr == b""
    return done.stdout.decode().splitlines()


def test_list_models_shows_the_providers_with_credentials_and_faux(tmp_path: Path) -> None:
    lines = _list_models(tmp_path, env={"FIREWORKS_API_KEY": "k", "AWS_PROFILE": "dev"})
    providers = {line.split()[0] for line in lines[1:]}
    assert providers == {"faux", "fireworks", "amazon-bedrock"}
    fireworks = [m for m in CATALOGUE if m.provider == "fireworks"]
    assert sum(line.startswith("fireworks ") for line in lines) == len(fireworks)
    bare = _list_models(tmp_path, env={})
    assert {line.split()[0] for line in bare[1:]} == {"faux"}


def test_list_models_all_shows_every_model_pi_lists(tmp_path: Path) -> None:
    lines = _list_models(tmp_path, "--all", env={"FIREWORKS_API_KEY": "k"})
    rows = [line.split() for line in lines[1:]]
    catalogue_rows = [row for row in rows if row[0] != "faux"]
    # pi 1.6.0's catalogue (issue 34; 0.73.1: 969 models of 31 providers): 43 providers, of
    # which typesafe has classifier models only.
    assert len(catalogue_rows) == len(CATALOGUE) == 1698
    assert len({row[0] for row in catalogue_rows}) == 42
    usable = {row[0] for row in catalogue_rows if row[-1] == "yes"}
    assert usable <= {"fireworks"}
