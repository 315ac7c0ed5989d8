"""``pitrio mcp login|logout`` and OAuth connections, against a real local OAuth server.

The server (tests/actors/mcp/servers/oauth_edge.py) is both the authorization server and
the MCP server; its ``/authorize`` approves at once, so the "browser" is an HTTP client that
follows the URL the login command prints to the loopback callback.
"""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import trio

from pitrio.actors.mcp.actor import McpHandle, start_mcp
from pitrio.actors.mcp.config import parse_server
from pitrio.actors.mcp.state import McpServerError
from tests.actors.mcp.support import KILL_SERVER, SERVERS, forked, wait_for

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def _oauth_server(tmp_path: Path, client: str = "", **knobs: str) -> AsyncIterator[str]:
    """The OAuth + MCP server (``client``: its preset client; ``knobs``: its other
    ``OAUTH_EDGE_*`` settings, by lower-case name), as the URL of its MCP path."""
    port_file = tmp_path / "port"
    settings = {f"OAUTH_EDGE_{name.upper()}": value for name, value in knobs.items()}
    process = await trio.lowlevel.open_process(
        [sys.executable, *forked(str(SERVERS / "oauth_edge.py"), str(port_file))],
        env={**os.environ, "OAUTH_EDGE_CLIENT": client, **settings},
    )
    try:
        await wait_for(port_file.exists, "the OAuth server to listen")
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.send_signal(KILL_SERVER)
        with trio.CancelScope(shield=True):
            await process.wait()


def _env(agent: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PITRIO_AGENT_DIR"] = str(agent)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _configure(agent: Path, entry: dict[str, Any]) -> None:
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"remote": entry}}))


async def _cli(agent: Path, cwd: Path, *args: str) -> tuple[int, str, str]:
    done = await trio.run_process(
        [sys.executable, "-m", "pitrio.transports.cli", "mcp", *args],
        stdin=b"",  # not a terminal: no paste prompt
        cwd=cwd,
        env=_env(agent),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _login_following_the_url(
    agent: Path, cwd: Path, *, paste: bool = False, **env: str
) -> tuple[int, str, str]:
    """Run ``pitrio mcp login remote`` and play the browser: open the printed URL. With
    ``paste``, stdin is a terminal and the browser cannot reach the callback: the URL it was
    redirected to is typed there instead."""
    login = ["mcp", "login", "remote", "--timeout", "60"]
    terminal, typing = pty.openpty() if paste else (-1, -1)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "pitrio.transports.cli", *login],
        cwd=cwd,
        env={**_env(agent), **env},
        stdin=typing if paste else -1,
        stdout=-1,
        stderr=-1,
    )
    if paste:
        os.close(typing)
    elif process.stdin is not None:
        await process.stdin.aclose()  # not a terminal: no paste prompt
    assert process.stdout is not None and process.stderr is not None
    out = b""
    with trio.fail_after(60):
        while b"/authorize?" not in out or not out.endswith(b"\n"):
            chunk = await process.stdout.receive_some()
            assert chunk, f"login ended before printing a URL: {out!r}"
            out += chunk
        url = next(line for line in out.decode().splitlines() if "/authorize?" in line)
        if paste:
            async with httpx.AsyncClient() as browser:
                page = await browser.get(url)
            assert page.status_code == 302
            os.write(terminal, page.headers["location"].encode() + b"\n")
        else:
            async with httpx.AsyncClient(follow_redirects=True) as browser:
                page = await browser.get(url)
            assert page.status_code == 200 and "Signed in" in page.text
        async for chunk in process.stdout:
            out += chunk
        err = b""
        async for chunk in process.stderr:
            err += chunk
        code = await process.wait()
    if paste:
        os.close(terminal)
    return code, out.decode(), err.decode()


async def _whoami(agent: Path, url: str, cwd: Path, **entry: Any) -> str:
    """Connect as a session does (``entry``: more of the server's entry) and ask the server
    which bearer token it got."""
    os.environ["PITRIO_AGENT_DIR"] = str(agent)
    config = parse_server("remote", {"url": url, **entry}, "test")
    async with trio.open_nursery() as nursery:
        handle: McpHandle = await start_mcp(nursery, [config], cwd=str(cwd))
        try:
            connection = await handle.connect("remote")
            result = await connection.session.call_tool("whoami", {})
            return str(result.content[0].text)  # type: ignore[union-attr]
        except McpServerError as exc:
            return f"error: {exc}"
        finally:
            nursery.cancel_scope.cancel()


@pytest.fixture
def agent_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    return agent


async def test_login_stores_pis_state_and_sessions_send_and_refresh_the_token(
    tmp_path: Path, agent_env: Path
) -> None:
    async with _oauth_server(tmp_path) as url:
        _configure(agent_env, {"url": url})
        # Without a token: the 401 tells the user to sign in.
        assert await _whoami(agent_env, url, tmp_path) == (
            'error: MCP server "remote" requires sign-in. Run pitrio mcp login remote to sign in.'
        )

        code, out, _ = await _cli(agent_env, tmp_path, "list")
        assert code == 1
        assert out.startswith(
            f"remote: needs sign-in (codemode, global)\n  {url}\n"
            "  sign in with: pitrio mcp login remote\n"
        )
        code, out, _ = await _cli(agent_env, tmp_path, "list", "--json")
        assert (code, json.loads(out)["servers"][0]["state"]) == (1, "needs-auth")

        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        assert 'Sign in to MCP server "remote" in your browser:\n' in out
        assert out.endswith('Signed in to MCP server "remote" (1 tools).\n')

        auth_file = agent_env / "mcp-auth.json"
        assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
        states = json.loads(auth_file.read_text())
        state = states[f"mcp__remote|{url}"]
        assert state["serverUrl"] == url
        assert state["tokens"]["access_token"] == "at-1"
        assert state["tokens"]["refresh_token"] == "rt-1"
        assert state["tokensExpireAt"] > 0
        assert state["clientInformation"]["client_id"]
        assert state["clientInformation"]["redirect_uris"][0].startswith("http://127.0.0.1:")

        assert await _whoami(agent_env, url, tmp_path) == "auth=Bearer at-1"
        # Signed in already: login says so and changes nothing.
        code, out, _ = await _cli(agent_env, tmp_path, "login", "remote")
        assert (code, out) == (0, 'Already signed in to MCP server "remote" (1 tools).\n')

        # An expired token is refreshed before it is sent, and the new one is saved.
        state["tokensExpireAt"] = 1000
        auth_file.write_text(json.dumps(states))
        assert await _whoami(agent_env, url, tmp_path) == "auth=Bearer at-2"
        saved = json.loads(auth_file.read_text())[f"mcp__remote|{url}"]
        assert saved["tokens"]["access_token"] == "at-2"
        assert saved["tokensExpireAt"] > 1000

        # A token the server rejects is refreshed too (here: one it never issued).
        states = json.loads(auth_file.read_text())
        states[f"mcp__remote|{url}"]["tokens"]["access_token"] = "forged"
        auth_file.write_text(json.dumps(states))
        assert await _whoami(agent_env, url, tmp_path) == "auth=Bearer at-3"
        # A refresh the authorization server refuses leaves only a sign-in.
        states = json.loads(auth_file.read_text())
        states[f"mcp__remote|{url}"]["tokens"].update(access_token="forged", refresh_token="no")
        auth_file.write_text(json.dumps(states))
        assert await _whoami(agent_env, url, tmp_path) == (
            'error: MCP server "remote" requires sign-in. Run pitrio mcp login remote to sign in.'
        )

        code, out, _ = await _cli(agent_env, tmp_path, "logout", "remote")
        assert (code, out) == (0, 'Signed out of MCP server "remote".\n')
        assert f"mcp__remote|{url}" not in json.loads(auth_file.read_text())
        code, out, _ = await _cli(agent_env, tmp_path, "logout", "remote")
        assert (code, out) == (0, 'No stored credentials for MCP server "remote".\n')


async def test_a_configured_client_signs_in_on_its_callback_port(
    tmp_path: Path, agent_env: Path
) -> None:
    with socket.socket() as probe:  # a port free now, for the entry's callbackPort
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redirect = f"http://127.0.0.1:{port}/callback"
    async with _oauth_server(tmp_path, f"my-client:s3cret:{redirect}") as url:
        oauth = {"clientId": "my-client", "clientSecret": "${EX_SECRET}", "callbackPort": port}
        _configure(agent_env, {"url": url, "oauth": oauth})
        code, out, err = await _login_following_the_url(agent_env, tmp_path, EX_SECRET="s3cret")
        assert (code, err) == (0, ""), out
        assert f"redirect_uri={quote(redirect, safe='')}" in out
        assert "client_id=my-client" in out
        state = json.loads((agent_env / "mcp-auth.json").read_text())[f"mcp__remote|{url}"]
        # No registration: the configured client (its secret resolved) is the one kept.
        assert state["clientInformation"]["client_id"] == "my-client"
        assert state["clientInformation"]["client_secret"] == "s3cret"
        assert state["tokens"]["access_token"] == "at-1"


async def test_on_a_terminal_the_redirected_url_can_be_pasted(
    tmp_path: Path, agent_env: Path
) -> None:
    async with _oauth_server(tmp_path) as url, trio.open_nursery() as nursery:
        _configure(agent_env, {"url": url})
        # A session that is running meanwhile: its server needs a sign-in...
        config = parse_server("remote", {"url": url}, "test")
        handle = await start_mcp(nursery, [config], cwd=str(tmp_path))
        with pytest.raises(McpServerError, match="requires sign-in"):
            await handle.connect("remote")

        code, out, err = await _login_following_the_url(agent_env, tmp_path, paste=True)
        assert code == 0, (out, err)
        assert (
            err == "If the browser cannot reach this machine, paste the URL it was redirected to: "
        )
        assert out.endswith('Signed in to MCP server "remote" (1 tools).\n')
        # ... and uses the new credentials on its next call.
        connection = await handle.connect("remote")
        result = await connection.session.call_tool("whoami", {})
        assert result.content[0].text == "auth=Bearer at-1"  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()


async def test_login_gives_up_at_its_timeout(tmp_path: Path, agent_env: Path) -> None:
    async with _oauth_server(tmp_path) as url:
        _configure(agent_env, {"url": url})
        code, out, err = await _cli(agent_env, tmp_path, "login", "remote", "--timeout", "1")
        assert code == 1
        assert 'Sign in to MCP server "remote" in your browser:' in out
        assert (
            err
            == 'Sign-in to MCP server "remote" was cancelled or not completed within 1 seconds.\n'
        )


@pytest.mark.parametrize(
    ("entry", "args", "message"),
    [
        ({"url": "http://127.0.0.1:9/mcp"}, ["login"], "Usage: pitrio mcp login <server> [-l]"),
        (
            {"url": "http://127.0.0.1:9/mcp"},
            ["login", "remot"],
            'No MCP server named "remot". Did you mean "remote"? Configured: remote.',
        ),
        (
            {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}},
            ["logout", "remote"],
            'MCP server "remote" does not use OAuth. '
            "Only HTTP servers without an Authorization header do.",
        ),
        ({"command": "true"}, ["login", "remote"], 'MCP server "remote" does not use OAuth.'),
        (
            {"url": "http://127.0.0.1:9/mcp"},
            ["login", "remote", "--timeout", "0"],
            "--timeout must be a positive number of seconds.",
        ),
        (
            {"url": "http://127.0.0.1:9/mcp"},
            ["login", "remote", "-l"],
            "not in the project; omit --local.",
        ),
    ],
)
async def test_login_and_logout_refuse_as_pi_does(
    tmp_path: Path, agent_env: Path, entry: dict[str, Any], args: list[str], message: str
) -> None:
    _configure(agent_env, entry)
    code, _, err = await _cli(agent_env, tmp_path, *args)
    assert code == 1
    assert message in err


async def test_two_processes_refreshing_one_token_refresh_it_once(
    tmp_path: Path, agent_env: Path
) -> None:
    """pi's refresh lock: two pitrio processes whose token the server rejects both want to
    refresh it with the same (rotating) refresh token; the server answers the refresh only
    after both were rejected, so the second waits on the lock while the first refreshes,
    then reads the new token instead of spending the spent refresh token."""
    grants = tmp_path / "grants"
    async with _oauth_server(tmp_path, log=str(grants), gate="2") as url:
        _configure(agent_env, {"url": url})
        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        auth_file = agent_env / "mcp-auth.json"
        states = json.loads(auth_file.read_text())
        states[f"mcp__remote|{url}"]["tokens"]["access_token"] = "forged"
        auth_file.write_text(json.dumps(states))

        results: list[tuple[int, str, str]] = []

        async def list_servers() -> None:
            results.append(await _cli(agent_env, tmp_path, "list", "--json"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(list_servers)
            nursery.start_soon(list_servers)
        for code, out, err in results:
            assert (code, json.loads(out)["servers"][0]["state"]) == (0, "connected"), err
        assert grants.read_text().splitlines() == ["code ", "refresh rt-1"]
        saved = json.loads(auth_file.read_text())[f"mcp__remote|{url}"]
        assert saved["tokens"]["access_token"] == "at-2"
        assert [n for n in os.listdir(agent_env) if n.endswith(".lock")] == []  # given back


async def test_a_server_asking_for_more_scope_gets_a_new_sign_in_with_it(
    tmp_path: Path, agent_env: Path
) -> None:
    """pi's re-consent: a 403 ``insufficient_scope`` is not refreshed (a refresh keeps the
    granted scope); the session's server needs a sign-in, and ``login`` asks for the
    configured scope, the granted one and the challenged one together."""
    grants, demand = tmp_path / "grants", tmp_path / "demand"
    async with _oauth_server(tmp_path, log=str(grants), step_up=str(demand)) as url:
        _configure(agent_env, {"url": url, "oauth": {"scope": "read"}})
        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        assert "&scope=read\n" in out
        assert await _whoami(agent_env, url, tmp_path) == "auth=Bearer at-1"

        demand.write_text("admin")  # the server now wants more than was granted
        assert await _whoami(agent_env, url, tmp_path) == (
            'error: MCP server "remote" requires sign-in. Run pitrio mcp login remote to sign in.'
        )
        code, out, _ = await _cli(agent_env, tmp_path, "list", "--json")
        assert (code, json.loads(out)["servers"][0]["state"]) == (1, "needs-auth")
        assert grants.read_text().splitlines() == ["code read"]  # no refresh was tried

        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        assert "&scope=read+admin\n" in out
        assert grants.read_text().splitlines() == ["code read", "code read admin"]
        assert await _whoami(agent_env, url, tmp_path) == "auth=Bearer at-2"
        state = json.loads((agent_env / "mcp-auth.json").read_text())[f"mcp__remote|{url}"]
        assert state["tokens"]["scope"] == "read admin"


async def test_login_redirects_to_the_configured_callback_url(
    tmp_path: Path, agent_env: Path
) -> None:
    """``callbackUrl`` without a port gets the free port the callback listens on; with one it
    is sent exactly as written (``localhost`` served on 127.0.0.1)."""
    async with _oauth_server(tmp_path) as url:
        _configure(agent_env, {"url": url, "oauth": {"callbackUrl": "http://127.0.0.1/back"}})
        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        state = json.loads((agent_env / "mcp-auth.json").read_text())[f"mcp__remote|{url}"]
        (redirect,) = state["clientInformation"]["redirect_uris"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/back", redirect)
        assert f"redirect_uri={quote(redirect, safe='')}" in out

        with socket.socket() as probe:  # a port free now
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        written = f"http://localhost:{port}/oauth/done"
        _configure(agent_env, {"url": url, "oauth": {"callbackUrl": written}})
        await _cli(agent_env, tmp_path, "logout", "remote")
        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        assert f"redirect_uri={quote(written, safe='')}" in out
        state = json.loads((agent_env / "mcp-auth.json").read_text())[f"mcp__remote|{url}"]
        assert state["clientInformation"]["redirect_uris"] == [written]


async def test_login_with_cimd_says_pitrio_has_no_client_document(
    tmp_path: Path, agent_env: Path
) -> None:
    async with _oauth_server(tmp_path) as url:
        _configure(agent_env, {"url": url, "oauth": {"clientRegistration": "cimd"}})
        code, _, err = await _cli(agent_env, tmp_path, "login", "remote")
        assert code == 1
        assert err == (
            'Sign-in to MCP server "remote" failed: oauth.clientRegistration "cimd" needs a '
            "Client ID Metadata Document, and pitrio has none (pi's are pi's identity); "
            'use "auto" or "dcr"\n'
        )


async def test_a_configured_metadata_document_replaces_discovery(
    tmp_path: Path, agent_env: Path
) -> None:
    """``oauth.authServerMetadataUrl``: the server advertises an authorization server that
    does not exist; with the document configured, sign-in and refreshes read the
    authorization server's metadata from it (each time: it is not kept in the file)."""
    requests = tmp_path / "requests"
    async with _oauth_server(tmp_path, requests=str(requests), wrong_as="1") as url:
        _configure(agent_env, {"url": url})
        code, _, err = await _cli(agent_env, tmp_path, "login", "remote", "--timeout", "30")
        assert code == 1 and err.startswith('Sign-in to MCP server "remote" failed: '), err

        oauth = {"authServerMetadataUrl": url.removesuffix("/mcp") + "/configured-metadata"}
        _configure(agent_env, {"url": url, "oauth": oauth})
        requests.write_text("")
        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out
        asked = requests.read_text().splitlines()
        assert "GET /configured-metadata" in asked
        assert not [line for line in asked if "oauth-authorization-server" in line]
        auth_file = agent_env / "mcp-auth.json"
        states = json.loads(auth_file.read_text())
        assert "discovery" not in states[f"mcp__remote|{url}"]

        states[f"mcp__remote|{url}"]["tokensExpireAt"] = 1000
        auth_file.write_text(json.dumps(states))
        requests.write_text("")
        assert await _whoami(agent_env, url, tmp_path, oauth=oauth) == "auth=Bearer at-2"
        asked = requests.read_text().splitlines()
        assert asked[:2] == ["GET /configured-metadata", "POST /token"]


async def test_a_server_with_auth_provider_gets_that_providers_token(
    tmp_path: Path, agent_env: Path
) -> None:
    """``auth.provider``: the server is sent the provider's key from ``auth.json`` (read on
    each connection, no OAuth, nothing in ``mcp-auth.json``); a 401 asks for a login to the
    provider."""
    async with _oauth_server(tmp_path) as url:
        _configure(agent_env, {"url": url})
        code, out, err = await _login_following_the_url(agent_env, tmp_path)
        assert (code, err) == (0, ""), out  # the server now knows the token at-1
        (agent_env / "auth.json").write_text(
            json.dumps({"my-provider": {"type": "api_key", "key": "at-1"}})
        )
        (agent_env / "auth.json").chmod(0o600)
        entry = {"auth": {"provider": "my-provider"}}
        (agent_env / "mcp-auth.json").unlink()
        assert await _whoami(agent_env, url, tmp_path, **entry) == "auth=Bearer at-1"
        assert not (agent_env / "mcp-auth.json").exists()

        (agent_env / "auth.json").write_text(
            json.dumps({"my-provider": {"type": "api_key", "key": "revoked"}})
        )
        assert await _whoami(agent_env, url, tmp_path, **entry) == (
            'error: MCP server "remote" requires sign-in. Run pitrio login my-provider to sign in.'
        )
        _configure(agent_env, {"url": url, **entry})
        code, _, err = await _cli(agent_env, tmp_path, "login", "remote")
        assert (code, 'MCP server "remote" does not use OAuth.' in err) == (1, True)
