"""``pitrio mcp add|remove|list`` against real pi 1.6.0's ``pi mcp``: the same command lines
give the same exit statuses, leave the same ``mcp.json``, and ``list --json`` reports the same
servers (state, tools, exposure, scope, resources; the error texts and file paths are each
agent's own, so only whether there is an error is compared).

Each agent runs the whole sequence in its own sandbox; the messages are each agent's words.
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

from tests.actors.mcp.support import forked
from tests.interop.pi_oneshot import base_env, pi_argv, run_in, sandbox
from tests.shared_dir import ROOT

PYTHON = str(ROOT / ".venv" / "bin" / "python")
TIME = ["--", PYTHON, *forked("-m", "mcp_server_time", "--local-timezone", "UTC")]
STEPS: list[list[str]] = [
    ["add", "time", "--exposure", "direct", "--env", "TZ_HINT=${HINT}", *TIME],
    ["add", "docs", "--url", "https://example.com/mcp", "--bearer-token-env-var", "TOK"],
    ["add", "docs", "--url", "https://example.com/mcp", "--description", "Docs", "-l"],
    ["add", "off", "--exposure", "hidden", "--", "never-started", "--flag"],
    ["remove", "off"],
    ["remove", "off"],
    ["remove", "docs"],
    ["add", "bad", "--url", "ftp://example.com/x"],
    ["add", "bad name", "--", "x"],
    ["add", "x", "--env", "A=1", "--url", "http://h/"],
    ["add", "x", "--header", "A=1", "--", "cmd"],
    ["add", "x", "--exposure", "loud", "--", "cmd"],
    ["add", "x"],
    ["add", "x", "--bogus", "1", "--", "cmd"],
    ["frob"],
    ["list", "extra"],
    ["--help"],
]
LISTING = ["list", "--json"]


def run_all(agent: str, base: Path) -> dict[str, Any]:
    """Run :data:`STEPS` then ``list --json`` in a fresh sandbox; what they left."""
    box = sandbox(agent, base)
    argv, root, agent_dir, work = box.argv, box.root, box.agent_dir, box.work
    env = {**base_env(root, agent_dir), "HINT": "utc"}

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return run_in([*argv, "mcp", *args], work, env)

    codes = [run(step).returncode for step in STEPS]
    # The project's file: pi's in .pi, pitrio's in .pitrio (its project dir; .pi only with
    # pi's agent dir).
    project = work / (".pi" if agent == "pi" else ".pitrio") / "mcp.json"
    files = {
        "global": json.loads((agent_dir / "mcp.json").read_text()),
        "project": json.loads(project.read_text()) if project.exists() else None,
    }
    listing = run(LISTING)
    report = json.loads(listing.stdout)
    for server in report["servers"]:
        server.pop("source")
        server["error"] = "error" in server
    return {"codes": codes, "files": files, "list": (listing.returncode, report)}


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, dict[str, Any]]]:
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-mcp-cli-"))
    try:
        yield {agent: run_all(agent, base) for agent in ("pi", "pitrio")}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_exit_statuses_are_pis(outcomes: dict[str, dict[str, Any]]) -> None:
    expected = [0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    assert outcomes["pi"]["codes"] == expected
    assert outcomes["pitrio"]["codes"] == expected


def test_the_files_left_are_pis(outcomes: dict[str, dict[str, Any]]) -> None:
    files = outcomes["pi"]["files"]
    assert list(files["global"]["mcpServers"]) == ["time"]
    assert files["project"] == {
        "mcpServers": {"docs": {"url": "https://example.com/mcp", "description": "Docs"}}
    }
    assert outcomes["pitrio"]["files"] == files


def test_list_json_reports_what_pi_reports(outcomes: dict[str, dict[str, Any]]) -> None:
    code, report = outcomes["pi"]["list"]
    assert code == 0 and report["errors"] == [] and "note" in report
    (time,) = report["servers"]
    assert (time["state"], time["tools"], time["error"]) == (
        "connected",
        ["get_current_time", "convert_time"],
        False,
    )
    pitrio_code, pitrio_report = outcomes["pitrio"]["list"]
    assert pitrio_code == code
    assert pitrio_report["servers"] == report["servers"]
    assert pitrio_report.keys() == report.keys()
