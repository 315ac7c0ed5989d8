"""``pitrio --list-models``: the table of usable models."""

from __future__ import annotations

import io
from pathlib import Path

import orjson

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
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["claude-sonnet-4-5"]
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
