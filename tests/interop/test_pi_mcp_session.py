"""A session with MCP tool calls passes between real pi 1.6.0 and pitrio: pi writes it (its
model calls ``mcp__time__get_current_time``), pitrio continues it (``-c``: the history goes to
the model as pi wrote it, and its model calls ``mcp__time__convert_time``), then pi continues
pitrio's file and sends the model both agents' calls and results.

One sandbox, one agent dir whose ``mcp.json`` has ``mcp-server-time`` (``direct``), a fresh
scripted mock LLM (Anthropic Messages) for each run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import ANTHROPIC, base_env, pi_argv, pitrio_argv
from tests.interop.pi_runner import MockLLM
from tests.interop.pi_steps import text, tool
from tests.interop.test_pi_cli_flags import MODELS, SETTINGS
from tests.interop.test_pi_mcp import time_server

NOW = ("mcp__time__get_current_time", {"timezone": "UTC"})
CONVERT = (
    "mcp__time__convert_time",
    {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
)


def run_in(
    root: Path, argv: list[str], args: list[str], queue: list[dict[str, Any]]
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run ``argv + args`` in ``root``'s work dir with its agent dir, against a fresh mock
    (Anthropic Messages) answering ``queue``; the process and the requests it sent."""
    agent_dir = root / "agent"
    mock = MockLLM(ANTHROPIC)
    try:
        mock.configure({"queue": queue})
        models = json.dumps(MODELS).replace("{base}", f"http://127.0.0.1:{mock.port}")
        (agent_dir / "models.json").write_text(models)
        done = subprocess.run(
            [*argv, *args],
            cwd=root / "work",
            env=base_env(root, agent_dir),
            input="",
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
        return done, mock.captured()
    finally:
        mock.close()


def _run(
    argv: list[str], root: Path, prompt: str, queue: list[dict[str, Any]]
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    return run_in(root, argv, ["-c", "-p", prompt], queue)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Any]]:
    pi = pi_argv()
    if pi is None:
        pytest.skip("pi 1.6.0 is not installed")
    root = Path(tempfile.mkdtemp(prefix="pitrio-mcp-session-"))
    try:
        (root / "agent").mkdir()
        (root / "work").mkdir()
        (root / "agent" / "settings.json").write_text(json.dumps(SETTINGS))
        servers = {"mcpServers": {"time": time_server()}}
        (root / "agent" / "mcp.json").write_text(json.dumps(servers))
        found: dict[str, Any] = {}
        found["pi"] = _run(pi, root, "what time is it", [tool(*NOW), text("it is now")])
        found["pitrio"] = _run(
            pitrio_argv(), root, "and in Paris", [tool(*CONVERT, id="call_fixed2"), text("there")]
        )
        found["pi again"] = _run(pi, root, "thanks", [text("welcome")])
        files = sorted((root / "agent" / "sessions").rglob("*.jsonl"))
        found["files"] = files
        found["entries"] = [json.loads(line) for line in files[-1].read_text().splitlines()]
        yield found
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _calls_and_results(request: dict[str, Any]) -> list[tuple[str, Any]]:
    """The tool calls (name) and results (whether an error) of a request, in order."""
    found: list[tuple[str, Any]] = []
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_use":
                found.append(("call", block["name"]))
            elif block.get("type") == "tool_result":
                found.append(("result", bool(block.get("is_error"))))
    return found


def test_every_run_succeeded_in_one_session_file(runs: dict[str, Any]) -> None:
    for name in ("pi", "pitrio", "pi again"):
        done, requests = runs[name]
        assert done.returncode == 0, f"{name}: {done.stderr[-600:]}"
        assert requests, name
    assert len(runs["files"]) == 1


def test_pitrio_continues_pis_mcp_calls_and_makes_its_own(runs: dict[str, Any]) -> None:
    _done, requests = runs["pitrio"]
    assert _calls_and_results(requests[0]) == [("call", NOW[0]), ("result", False)]
    assert _calls_and_results(requests[-1]) == [
        ("call", NOW[0]),
        ("result", False),
        ("call", CONVERT[0]),
        ("result", False),
    ]


def test_pi_continues_pitrios_mcp_calls(runs: dict[str, Any]) -> None:
    _done, requests = runs["pi again"]
    assert _calls_and_results(requests[0]) == [
        ("call", NOW[0]),
        ("result", False),
        ("call", CONVERT[0]),
        ("result", False),
    ]
    results = [
        e["message"]
        for e in runs["entries"]
        if e.get("type") == "message" and e["message"].get("role") == "toolResult"
    ]
    assert [(r["toolName"], r["isError"]) for r in results] == [
        (NOW[0], False),
        (CONVERT[0], False),
    ]
    assert "Europe/Paris" in results[1]["content"][0]["text"]
    # pi's result (the first) and pitrio's have the same shape.
    assert [r["details"] for r in results] == [
        {"server": "time", "tool": "get_current_time"},
        {"server": "time", "tool": "convert_time"},
    ]
    assert [[part["type"] for part in r["content"]] for r in results] == [["text"], ["text"]]
