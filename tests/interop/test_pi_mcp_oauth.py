"""``mcp-auth.json`` is one file for both agents: real pi 1.6.0 connects with the tokens
``pitrio mcp login`` stored, refreshes them in the same file, and pitrio connects with what pi
left; ``pi mcp logout`` removes what pitrio wrote.

The server is tests/actors/mcp/servers/oauth_edge.py (authorization server and MCP server in
one process, approving every request), so the "browser" is an HTTP client.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pitrio.actors.mcp.auth_lock import REFRESH_LOCK_STALE_S, refresh_lock_target
from pitrio.actors.model_router.auth_file import try_lock, unlock
from tests.actors.mcp.support import KILL_SERVER, SERVERS, forked
from tests.interop.pi_install import find_pi
from tests.interop.pi_oneshot import base_env, pi_argv, pitrio_argv, run_in, sandbox


@contextmanager
def _serve(**knobs: str) -> Iterator[str]:
    """The OAuth + MCP server with ``OAUTH_EDGE_*`` ``knobs``; the URL of its MCP path."""
    base = Path(tempfile.mkdtemp(prefix="pitrio-oauth-server-"))
    port_file = base / "port"
    settings = {f"OAUTH_EDGE_{name.upper()}": value for name, value in knobs.items()}
    process = subprocess.Popen(
        [sys.executable, *forked(str(SERVERS / "oauth_edge.py"), str(port_file))],
        env={**os.environ, **settings},
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():  # the server writes the file once it listens
            assert process.poll() is None and time.monotonic() < deadline, "no OAuth server"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.send_signal(KILL_SERVER)
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


HOLD_WITH_PROPER_LOCKFILE = """
const lockfile = require(process.argv[1]);
lockfile.lock(process.argv[2], { realpath: false, stale: 20000 }).then((release) => {
  process.stdout.write("locked\\n");
  process.stdin.on("end", () => release().then(() => process.exit(0)));
  process.stdin.resume();
});
"""


def _wait_for_line(path: Path, line: str) -> None:
    deadline = time.monotonic() + 60
    while line not in path.read_text().splitlines():
        assert time.monotonic() < deadline, f"no {line!r} in {path}"
        time.sleep(0.05)


@pytest.mark.parametrize("holder", ["pi", "pitrio"])
def test_a_refresh_waits_for_the_other_agents_lock(holder: str) -> None:
    """One agent holds the refresh lock (pi: proper-lockfile itself, with pi's options;
    pitrio: its own helper) while the other's request with the stale token is rejected;
    the holder then refreshes, saves and lets go, and the waiting agent uses the saved
    token: the token endpoint sees the holder's refresh only."""
    found_node, cli, _ = find_pi()
    if found_node is None or cli is None or pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    waiter = "pitrio" if holder == "pi" else "pi"
    base = Path(tempfile.mkdtemp(prefix="pitrio-mcp-oauth-lock-"))
    grants, requests = base / "grants", base / "requests"
    try:
        with _serve(log=str(grants), requests=str(requests)) as url:
            box = sandbox(waiter, base)
            env = base_env(box.root, box.agent_dir)
            (box.agent_dir / "mcp.json").write_text(
                json.dumps({"mcpServers": {"remote": {"url": url}}})
            )
            _login(pitrio_argv(), box.work, {**os.environ, **env})
            key = f"mcp__remote|{url}"
            auth_file = box.agent_dir / "mcp-auth.json"
            states = json.loads(auth_file.read_text())
            signed_in = dict(states[key]["tokens"])
            states[key]["tokens"]["access_token"] = "forged"
            auth_file.write_text(json.dumps(states))

            target = refresh_lock_target(box.agent_dir, key)
            holding: subprocess.Popen[str] | None = None
            if holder == "pi":
                library = str(cli.parents[3] / "proper-lockfile")
                holding = subprocess.Popen(
                    [str(found_node), "-e", HOLD_WITH_PROPER_LOCKFILE, library, str(target)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert holding.stdout is not None and holding.stdout.readline() == "locked\n"
            else:
                assert try_lock(target, time.time(), REFRESH_LOCK_STALE_S)
            requests.write_text("")
            waiting = subprocess.Popen(
                [*box.argv, "mcp", "list", "--json"],
                cwd=box.work,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            _wait_for_line(requests, "POST /mcp")  # its stale token was rejected

            # The holder refreshes, saves the new tokens and lets go.
            client = states[key]["clientInformation"]["client_id"]
            answer = httpx.post(
                url.removesuffix("/mcp") + "/token",
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": signed_in["refresh_token"],
                    "client_id": client,
                },
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            states[key]["tokens"] = answer.json()
            states[key]["tokensExpireAt"] = int(time.time() * 1000) + 3_600_000
            auth_file.write_text(json.dumps(states))
            if holding is not None:
                assert holding.stdin is not None
                holding.stdin.close()
                assert holding.wait(timeout=30) == 0
            else:
                unlock(target)

            out, err = waiting.communicate(timeout=120)
            report = json.loads(out)["servers"][0]
            assert (waiting.returncode, report["state"]) == (0, "connected"), err
            assert grants.read_text().splitlines() == ["code ", "refresh rt-1"]
            assert json.loads(auth_file.read_text())[key]["tokens"]["access_token"] == "at-2"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _asked_scope(out: str) -> str:
    """The ``scope`` of the authorization URL a login printed."""
    url = next(line for line in out.splitlines() if "/authorize?" in line)
    return parse_qs(urlsplit(url.strip()).query)["scope"][0]


@pytest.mark.parametrize("agent", ["pi", "pitrio"])
def test_more_scope_needs_a_new_sign_in_that_asks_for_it(agent: str) -> None:
    """Re-consent, the same in both agents: with ``oauth.scope`` "read" granted, the server
    starts asking for "admin" (403 ``insufficient_scope``); the server needs a sign-in (no
    refresh is tried), and the next login asks for "read admin"."""
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-mcp-oauth-scope-"))
    grants, demand = base / "grants", base / "demand"
    try:
        with _serve(log=str(grants), step_up=str(demand)) as url:
            box = sandbox(agent, base)
            env = {**os.environ, **base_env(box.root, box.agent_dir)}
            entry = {"url": url, "oauth": {"scope": "read"}}
            (box.agent_dir / "mcp.json").write_text(json.dumps({"mcpServers": {"remote": entry}}))
            assert _asked_scope(_login(box.argv, box.work, env)) == "read"
            demand.write_text("admin")
            listed = run_in([*box.argv, "mcp", "list", "--json"], box.work, env)
            assert json.loads(listed.stdout)["servers"][0]["state"] == "needs-auth", listed
            assert _asked_scope(_login(box.argv, box.work, env)) == "read admin"
            assert grants.read_text().splitlines() == ["code read", "code read admin"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


OAUTH_ENTRIES: list[dict[str, Any]] = [
    {"oauth": {"clientId": "a", "clientSecret": "s", "callbackPort": 8765, "scope": "a b"}},
    {"oauth": {"callbackPort": 0}},
    {"oauth": {"callbackUrl": "http://example.com/callback"}},
    {"oauth": {"callbackUrl": "http://127.0.0.1/cb?x=1"}},
    {"oauth": {"callbackUrl": "http://127.0.0.1:8000/cb", "callbackPort": 9000}},
    {"oauth": {"callbackUrl": "http://[::1]/back", "clientRegistration": "dcr"}},
    {"oauth": {"clientName": " "}},
    {"oauth": {"clientRegistration": "x"}},
    {"oauth": {"clientRegistration": "cimd", "clientId": "a"}},
    {"oauth": {"clientRegistration": "cimd", "callbackUrl": "http://localhost/back"}},
    {"oauth": {"clientRegistration": "cimd", "callbackUrl": "http://localhost/callback"}},
    {"oauth": {"authServerMetadataUrl": "http://example.com/.well-known/openid-configuration"}},
    {"oauth": {"authServerMetadataUrl": "https://example.com/.well-known/openid-configuration"}},
    {"auth": {"provider": ""}},
    {"auth": {"provider": "anthropic"}},
    {"url": "http://example.com/mcp", "auth": {"provider": "anthropic"}},
]


def test_oauth_and_auth_entries_are_accepted_and_refused_as_pi_does() -> None:
    """Each ``oauth`` / ``auth`` entry is an error in pitrio's ``mcp list`` exactly when it
    is one in pi's, with pi's message (the prefix naming file and server is each agent's)."""
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-mcp-oauth-entries-"))
    try:
        verdicts: dict[str, dict[int, str]] = {}
        for agent in ("pi", "pitrio"):
            box = sandbox(agent, base)
            env = base_env(box.root, box.agent_dir)
            servers = {
                f"s{i}": {"url": "http://127.0.0.1:9/mcp", "enabled": False, **entry}
                for i, entry in enumerate(OAUTH_ENTRIES)
            }
            (box.agent_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
            listed = run_in([*box.argv, "mcp", "list", "--json"], box.work, env)
            # pi: `<file>: server "s1": <message>`; pitrio: `<file>: MCP server s1: <message>`.
            named = (
                re.search(r'\bs(\d+)"?: (.*)$', error)
                for error in json.loads(listed.stdout)["errors"]
            )
            verdicts[agent] = {int(found[1]): found[2] for found in named if found}
        assert verdicts["pitrio"] == verdicts["pi"]
        assert len(verdicts["pi"]) == 11  # the test's own check of its cases
    finally:
        shutil.rmtree(base, ignore_errors=True)
