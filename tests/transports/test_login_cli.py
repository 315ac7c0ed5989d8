"""``pitrio login PROVIDER`` end to end: a real subprocess on pipes, a loopback OAuth vendor."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.actors.model_router import oauth
from pitrio.actors.model_router.oauth import normalize_domain
from pitrio.actors.model_router.oauth_login import copilot_model_ids, next_wait
from tests.oauth_server import oauth_vendor


class Terminal:
    """The stdout of a running ``pitrio login``, read up to an expected text."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.seen = b""
        self.stderr = b""

    async def until(self, text: str) -> str:
        """Everything written so far, once ``text`` has appeared (fails on EOF before it)."""
        assert self.process.stdout is not None
        while text.encode() not in self.seen:
            chunk = await self.process.stdout.receive_some(65536)
            assert chunk, f"pitrio login ended before {text!r}; it wrote {self.seen!r}"
            self.seen += chunk
        return self.seen.decode()

    async def answer(self, line: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(line.encode() + b"\n")


def login_env(tmp_path: Path, base: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    environment.update(
        HOME=str(tmp_path),
        PITRIO_AGENT_DIR=str(tmp_path / "agent"),
        **{oauth.TEST_BASE_ENV: base},
    )
    return environment


@asynccontextmanager
async def running_login(tmp_path: Path, base: str, provider: str) -> AsyncIterator[Terminal]:
    """``pitrio login PROVIDER`` on pipes; on leaving, its exit and whole stderr are recorded."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "pitrio.transports.cli", "login", provider],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=login_env(tmp_path, base),
    )
    terminal = Terminal(process)
    try:
        yield terminal
        with trio.fail_after(60):  # a hung login is a failure, not a stuck suite
            assert process.stderr is not None
            while chunk := await process.stderr.receive_some(65536):
                terminal.stderr += chunk
            await process.wait()
            assert process.stdout is not None
            while chunk := await process.stdout.receive_some(65536):
                terminal.seen += chunk
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def challenge_of(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize_query(text: str, base: str) -> dict[str, str]:
    url = next(word for word in text.split() if word.startswith(base))
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def auth_file(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "agent" / "auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    document: dict[str, Any] = orjson.loads(path.read_bytes())
    return document


async def test_login_anthropic_with_a_pasted_redirect_url(tmp_path: Path) -> None:
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/v1/oauth/token",
            200,
            {
                "access_token": "sk-ant-oat01-x",
                "refresh_token": "sk-ant-ort01-y",
                "expires_in": 28800,
            },
        )
        async with running_login(tmp_path, base, "anthropic") as terminal:
            query = authorize_query(await terminal.until("Paste the authorization code"), base)
            assert query["client_id"] == oauth.ANTHROPIC_CLIENT_ID
            assert query["redirect_uri"] == oauth.ANTHROPIC_REDIRECT_URI
            assert query["code_challenge_method"] == "S256"
            assert "user:inference" in query["scope"]
            state = query["state"]
            await terminal.answer(f"{oauth.ANTHROPIC_REDIRECT_URI}?code=the-code&state={state}")
            # pi 1.6.0's message: the provider's name, then where the credentials went
            text = await terminal.until("Logged in to Anthropic. Credentials saved to ")
            assert text.rstrip().endswith(str(tmp_path / "agent" / "auth.json"))
    assert terminal.process.returncode == 0
    (exchange,) = vendor.requests
    body = exchange.json()
    assert body["grant_type"] == "authorization_code"
    assert (body["code"], body["state"]) == ("the-code", state)
    assert challenge_of(body["code_verifier"]) == query["code_challenge"]
    entry = auth_file(tmp_path)["anthropic"]
    assert entry["type"] == "oauth"
    assert (entry["access"], entry["refresh"]) == ("sk-ant-oat01-x", "sk-ant-ort01-y")
    assert isinstance(entry["expires"], int)


async def test_login_codex_rejects_a_url_from_another_login(tmp_path: Path) -> None:
    async with (
        oauth_vendor() as (vendor, base),
        running_login(tmp_path, base, "openai-codex") as terminal,
    ):
        query = authorize_query(await terminal.until("Paste the authorization code"), base)
        assert query["originator"] == "pi" and query["codex_cli_simplified_flow"] == "true"
        await terminal.answer(f"{oauth.CODEX_REDIRECT_URI}?code=c&state=not-{query['state']}")
    assert terminal.process.returncode == 1
    assert b"OAuth state mismatch" in terminal.stderr
    assert b"Traceback" not in terminal.stderr
    assert vendor.requests == []
    assert not (tmp_path / "agent" / "auth.json").exists()


async def test_login_copilot_device_flow(tmp_path: Path) -> None:
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/login/device/code",
            200,
            {
                "device_code": "dev-1",
                "user_code": "ABCD-1234",
                "verification_uri": "https://github.com/login/device",
                "interval": 1,
                "expires_in": 900,
            },
        )
        vendor.script("/login/oauth/access_token", 200, {"error": "authorization_pending"})
        vendor.script("/login/oauth/access_token", 200, {"access_token": "gho_granted"})
        vendor.script(
            "/copilot_internal/v2/token",
            200,
            {
                "token": "tid=9;proxy-ep=proxy.individual.githubcopilot.com",
                "expires_at": 2_000_000_000,
            },
        )
        # One model's policy is accepted; every other policy path answers 404, which pi
        # ignores: the login still succeeds.
        vendor.script("/models/claude-sonnet-4.6/policy", 200, {"state": "enabled"})
        async with running_login(tmp_path, base, "github-copilot") as terminal:
            await terminal.until("GitHub Enterprise URL/domain")
            await terminal.answer("")
            text = await terminal.until("enter code: ABCD-1234")
            assert "https://github.com/login/device" in text
            await terminal.until("Enabling models...")
            await terminal.until("Logged in to GitHub Copilot")
    assert terminal.process.returncode == 0
    paths = [request.path for request in vendor.requests]
    assert paths[:4] == [
        "/login/device/code",
        "/login/oauth/access_token",
        "/login/oauth/access_token",
        "/copilot_internal/v2/token",
    ]
    assert sorted(paths[4:]) == sorted(f"/models/{id}/policy" for id in copilot_model_ids())
    assert "/models/claude-sonnet-4.6/policy" in paths[4:]
    policy = vendor.requests[4]
    assert policy.method == "POST" and policy.json() == {"state": "enabled"}
    assert policy.headers["authorization"] == (
        "Bearer tid=9;proxy-ep=proxy.individual.githubcopilot.com"
    )
    assert policy.headers["openai-intent"] == policy.headers["x-interaction-type"] == "chat-policy"
    assert policy.headers["copilot-integration-id"] == "vscode-chat"
    assert vendor.requests[0].form() == {"client_id": oauth.COPILOT_CLIENT_ID, "scope": "read:user"}
    assert vendor.requests[1].form()["device_code"] == "dev-1"
    assert vendor.requests[3].headers["authorization"] == "Bearer gho_granted"
    assert auth_file(tmp_path)["github-copilot"] == {
        "type": "oauth",
        "refresh": "gho_granted",
        "access": "tid=9;proxy-ep=proxy.individual.githubcopilot.com",
        "expires": 2_000_000_000_000 - 300_000,
    }


async def test_login_copilot_device_flow_denied(tmp_path: Path) -> None:
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/login/device/code",
            200,
            {"device_code": "d", "user_code": "U", "verification_uri": "https://x/device",
             "interval": 1, "expires_in": 900},
        )  # fmt: skip
        vendor.script(
            "/login/oauth/access_token",
            200,
            {"error": "access_denied", "error_description": "The user denied the request"},
        )
        async with running_login(tmp_path, base, "github-copilot") as terminal:
            await terminal.until("GitHub Enterprise URL/domain")
            await terminal.answer("")
    assert terminal.process.returncode == 1
    assert terminal.stderr == (  # pi 1.6.0's "Failed to log in to <name>: <why>"
        b"Failed to log in to GitHub Copilot: "
        b"Device flow failed: access_denied: The user denied the request\n"
    )


def test_login_of_an_unknown_provider_names_the_known_ones(tmp_path: Path) -> None:
    result = subprocess.run(  # pi 1.6.0: exit 1, the providers one can log in to
        [sys.executable, "-m", "pitrio.transports.cli", "login", "nope"],
        env=login_env(tmp_path, "http://127.0.0.1:9"),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert lines[0] == 'Unknown provider "nope".'
    assert lines[1].startswith("Providers: ") and "anthropic, " in lines[1]
    assert "openai-codex" in lines[1].split(", ")


def _auth(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", "auth", *args],
        env=login_env(tmp_path, "http://127.0.0.1:9"),
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_api_key_login_then_logout(tmp_path: Path) -> None:
    saved = _auth(tmp_path, "login", "openai", stdin="sk-typed\n")
    path = tmp_path / "agent" / "auth.json"
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.endswith(f"Saved API key for OpenAI. Credentials saved to {path}\n")
    assert auth_file(tmp_path)["openai"] == {"type": "api_key", "key": "sk-typed"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    printed = _auth(tmp_path, "print-api-key", "--provider", "openai")
    assert (printed.stdout, printed.returncode) == ("sk-typed\n", 0)
    # --api-key for a subscription provider that also takes keys
    assert _auth(tmp_path, "login", "anthropic", "--api-key", stdin="sk-ant\n").returncode == 0
    assert auth_file(tmp_path)["anthropic"] == {"type": "api_key", "key": "sk-ant"}
    no_key = _auth(tmp_path, "login", "openai-codex", "--api-key")
    assert no_key.returncode == 1
    assert no_key.stderr == "OpenAI Codex has no API key login. Omit --api-key to sign in.\n"
    empty = _auth(tmp_path, "login", "groq", stdin="\n")
    assert (empty.returncode, empty.stderr) == (1, "Failed to log in to Groq: no API key given\n")

    gone = _auth(tmp_path, "logout", "openai")
    assert gone.returncode == 0
    assert gone.stdout == (
        "Removed stored API key for OpenAI. "
        "Environment variables and models.json config are unchanged.\n"
    )
    assert "openai" not in auth_file(tmp_path) and "anthropic" in auth_file(tmp_path)
    again = _auth(tmp_path, "logout", "openai")
    assert again.stdout.startswith("No stored credentials for OpenAI.") and again.returncode == 0
    unknown = _auth(tmp_path, "logout", "nope")
    assert unknown.returncode == 1
    assert unknown.stderr == 'Unknown provider "nope".\nStored credentials: anthropic\n'


def test_auth_help_and_usage(tmp_path: Path) -> None:
    shown = _auth(tmp_path, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith("Usage:\n  pitrio auth login")
    assert _auth(tmp_path, "login").stderr == (
        "Usage: pitrio auth login <provider> [--api-key] [--no-browser]\n"
    )
    assert _auth(tmp_path, "logout", "a", "b").returncode == 1


def test_poll_schedule_and_domains() -> None:
    assert next_wait(5, 1.2, 900) == 6.0
    assert next_wait(0, 1.2, 900) == 1.2  # GitHub's interval is floored at one second
    assert next_wait(5, 1.2, 2.5) == 2.5  # never past the code's expiry
    assert normalize_domain("https://company.ghe.com/login") == "company.ghe.com"
    assert normalize_domain("company.ghe.com") == "company.ghe.com"
    assert normalize_domain("  ") is None


@pytest.mark.parametrize(
    ("pasted", "expected"),
    [
        ("http://localhost:1455/auth/callback?code=c1&state=s1", ("c1", "s1")),
        ("c2#s2", ("c2", "s2")),
        ("code=c3&state=s3", ("c3", "s3")),
        ("  c4  ", ("c4", None)),
        ("", (None, None)),
    ],
)
def test_pasted_code_forms(pasted: str, expected: tuple[str | None, str | None]) -> None:
    assert oauth.parse_pasted_code(pasted) == expected
