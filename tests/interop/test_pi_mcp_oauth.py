"""``mcp-auth.json`` is one file for both agents: real pi 1.6.0 connects with the tokens
``pitrio mcp login`` stored, refreshes them in the same file, and pitrio connects with what pi
left; ``pi mcp logout`` removes what pitrio wrote.

The server is tests/actors/mcp/servers/oauth_edge.py (authorization server and MCP server in
one process, approving every request), so the "browser" is an HTTP client.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.actors.mcp.support import SERVERS
from tests.interop.pi_oneshot import base_env, pi_argv, pitrio_argv, run_in, sandbox


@contextmanager
def _serve(**knobs: str) -> Iterator[str]:
    """The OAuth + MCP server with ``OAUTH_EDGE_*`` ``knobs``; the URL of its MCP path."""
    base = Path(tempfile.mkdtemp(prefix="pitrio-oauth-server-"))
    port_file = base / "port"
    settings = {f"OAUTH_EDGE_{name.upper()}": value for name, value in knobs.items()}
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "oauth_edge.py"), str(port_file)],
        env={**os.environ, **settings},
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():  # the server writes the file once it listens
            assert process.poll() is None and time.monotonic() < deadline, "no OAuth server"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def server_url() -> Iterator[str]:
    with _serve() as url:
        yield url


def _login(argv: list[str], work: Path, env: dict[str, str]) -> str:
    """``mcp login remote``, following the printed URL as a browser would; its stdout."""
    process = subprocess.Popen(
        [*argv, "mcp", "login", "remote", "--timeout", "60"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "/authorize?" in line:
            page = httpx.get(line.strip(), follow_redirects=True, timeout=30)
            assert page.status_code == 200
            break
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, (lines, out, err)
    return "".join(lines) + out


def test_pi_and_pitrio_share_mcp_auth_json(server_url: str) -> None:
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-mcp-oauth-"))
    try:
        boxes = {agent: sandbox(agent, base) for agent in ("pi", "pitrio")}
        envs = {name: base_env(box.root, box.agent_dir) for name, box in boxes.items()}
        for box in boxes.values():
            (box.agent_dir / "mcp.json").write_text(
                json.dumps({"mcpServers": {"remote": {"url": server_url}}})
            )
        mine, pis = boxes["pitrio"], boxes["pi"]
        out = _login(pitrio_argv(), mine.work, {**os.environ, **envs["pitrio"]})
        assert 'Signed in to MCP server "remote" (1 tools).' in out
        key = f"mcp__remote|{server_url}"
        written = json.loads((mine.agent_dir / "mcp-auth.json").read_text())

        # pi connects with pitrio's tokens.
        shutil.copy(mine.agent_dir / "mcp-auth.json", pis.agent_dir / "mcp-auth.json")
        listed = run_in([*pis.argv, "mcp", "list", "--json"], pis.work, envs["pi"])
        report = json.loads(listed.stdout)["servers"][0]
        assert (listed.returncode, report["state"], report["tools"]) == (0, "connected", ["whoami"])

        # pi refreshes an expired one and writes the new tokens; pitrio connects with them.
        written[key]["tokensExpireAt"] = 1000
        (pis.agent_dir / "mcp-auth.json").write_text(json.dumps(written))
        listed = run_in([*pis.argv, "mcp", "list", "--json"], pis.work, envs["pi"])
        assert json.loads(listed.stdout)["servers"][0]["state"] == "connected", listed.stdout
        refreshed = json.loads((pis.agent_dir / "mcp-auth.json").read_text())[key]
        assert refreshed["tokens"]["access_token"] == "at-2"
        assert refreshed["tokensExpireAt"] > 1000
        shutil.copy(pis.agent_dir / "mcp-auth.json", mine.agent_dir / "mcp-auth.json")
        listed = run_in([*mine.argv, "mcp", "list", "--json"], mine.work, envs["pitrio"])
        report = json.loads(listed.stdout)["servers"][0]
        assert (listed.returncode, report["state"]) == (0, "connected"), listed.stdout

        # pi's logout removes the entry pitrio wrote.
        logout = run_in([*pis.argv, "mcp", "logout", "remote"], pis.work, envs["pi"])
        assert logout.returncode == 0 and "Signed out" in logout.stdout
        assert key not in json.loads((pis.agent_dir / "mcp-auth.json").read_text())
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_pi_and_pitrio_refreshing_at_once_refresh_once() -> None:
    """pi's refresh lock excludes pitrio and the other way round: both agents share one
    agent dir, the server rejects the stored token, and it answers the refresh only once
    both agents were rejected, so whichever refreshes second waits on the lock the first
    holds, then takes the new token from the file instead of spending the rotated refresh
    token (which would need a sign-in)."""
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-mcp-oauth-race-"))
    grants = base / "grants"
    try:
        with _serve(log=str(grants), gate="2") as url:
            boxes = {agent: sandbox(agent, base) for agent in ("pi", "pitrio")}
            shared = boxes["pitrio"].agent_dir  # one agent dir: one mcp-auth.json, one lock
            envs = {name: base_env(box.root, shared) for name, box in boxes.items()}
            (shared / "mcp.json").write_text(json.dumps({"mcpServers": {"remote": {"url": url}}}))
            mine = boxes["pitrio"]
            _login(pitrio_argv(), mine.work, {**os.environ, **envs["pitrio"]})
            key = f"mcp__remote|{url}"
            states = json.loads((shared / "mcp-auth.json").read_text())
            states[key]["tokens"]["access_token"] = "forged"
            (shared / "mcp-auth.json").write_text(json.dumps(states))

            running = {
                name: subprocess.Popen(
                    [*box.argv, "mcp", "list", "--json"],
                    cwd=box.work,
                    env=envs[name],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for name, box in boxes.items()
            }
            for name, process in running.items():
                out, err = process.communicate(timeout=120)
                report = json.loads(out)["servers"][0]
                assert (process.returncode, report["state"]) == (0, "connected"), (name, err)
            assert grants.read_text().splitlines() == ["code ", "refresh rt-1"]
            saved = json.loads((shared / "mcp-auth.json").read_text())[key]
            assert saved["tokens"]["access_token"] == "at-2"
    finally:
        shutil.rmtree(base, ignore_errors=True)
