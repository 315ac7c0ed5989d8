"""OAuth entries of auth.json: pi's refresh against a loopback token endpoint, pi's lock."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from pitrio.actors.model_router import oauth
from pitrio.actors.model_router.auth_file import lock_path
from pitrio.actors.model_router.credentials import Credentials
from pitrio.errors import CredentialError
from tests.oauth_server import oauth_vendor

NOW = 1_800_000_000.0  # seconds; the store's clock is pinned to it


def write_auth(path: Path, document: dict[str, Any]) -> None:
    path.write_bytes(orjson.dumps(document))
    path.chmod(0o600)


def store(tmp_path: Path, base: str) -> Credentials:
    return Credentials(
        auth_path=tmp_path / "auth.json",
        env={oauth.TEST_BASE_ENV: base},
        clock=lambda: NOW,
    )


def expired(
    access: str = "old-access", refresh: str = "old-refresh", **extra: Any
) -> dict[str, Any]:
    return {"type": "oauth", "refresh": refresh, "access": access, "expires": 1000, **extra}


def codex_jwt(account: str) -> str:
    claims = {oauth.CODEX_JWT_CLAIM: {"chatgpt_account_id": account}}
    payload = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    return f"eyJhbGciOiJub25lIn0.{payload}.sig"


async def test_anthropic_refresh_writes_new_tokens_back(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    write_auth(path, {"anthropic": expired(), "openai": {"type": "api_key", "key": "sk-keep"}})
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/v1/oauth/token",
            200,
            {"access_token": "new-access", "refresh_token": "new-refresh", "expires_in": 3600},
        )
        credentials = store(tmp_path, base)
        assert await credentials.api_key("anthropic") == "new-access"
    (request,) = vendor.requests
    assert (request.method, request.path) == ("POST", "/v1/oauth/token")
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "grant_type": "refresh_token",
        "client_id": oauth.ANTHROPIC_CLIENT_ID,
        "refresh_token": "old-refresh",
    }
    assert orjson.loads(path.read_bytes()) == {
        "anthropic": {
            "type": "oauth",
            "refresh": "new-refresh",
            "access": "new-access",
            "expires": int(NOW * 1000) + 3600_000 - 300_000,  # pi stores it 5 minutes early
        },
        "openai": {"type": "api_key", "key": "sk-keep"},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not lock_path(path).exists()
    assert os.listdir(tmp_path) == ["auth.json"]  # no temp file left


async def test_codex_refresh_is_a_form_and_keeps_the_account_id(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    write_auth(path, {"openai-codex": expired(accountId="acct-old")})
    access = codex_jwt("acct-7")
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/oauth/token",
            200,
            {"access_token": access, "refresh_token": "r2", "expires_in": 864000},
        )
        assert await store(tmp_path, base).api_key("openai-codex") == access
    assert vendor.requests[0].form() == {
        "grant_type": "refresh_token",
        "refresh_token": "old-refresh",
        "client_id": oauth.CODEX_CLIENT_ID,
    }
    entry = orjson.loads(path.read_bytes())["openai-codex"]
    assert entry == {
        "type": "oauth",
        "refresh": "r2",
        "access": access,
        "expires": int(NOW * 1000) + 864000_000,
        "accountId": "acct-7",
    }


async def test_copilot_refresh_exchanges_the_github_token(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    write_auth(path, {"github-copilot": expired(refresh="gho_github", enterpriseUrl="ghe.example")})
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/copilot_internal/v2/token",
            200,
            {"token": "tid=1;proxy-ep=proxy.ghe.example", "expires_at": 1_800_001_800},
        )
        key = await store(tmp_path, base).api_key("github-copilot")
    assert key == "tid=1;proxy-ep=proxy.ghe.example"
    (request,) = vendor.requests
    assert request.method == "GET"
    assert request.headers["authorization"] == "Bearer gho_github"
    assert request.headers["copilot-integration-id"] == "vscode-chat"
    assert request.headers["editor-version"] == "vscode/1.107.0"
    assert orjson.loads(path.read_bytes())["github-copilot"] == {
        "type": "oauth",
        "refresh": "gho_github",
        "access": key,
        "expires": 1_800_001_800_000 - 300_000,
        "enterpriseUrl": "ghe.example",
    }
    assert oauth.copilot_base_url(key, "ghe.example") == "https://api.ghe.example"


async def test_a_fresh_token_is_used_without_contacting_the_vendor(tmp_path: Path) -> None:
    write_auth(
        tmp_path / "auth.json",
        {"anthropic": {**expired(), "access": "live", "expires": int(NOW * 1000) + 1}},
    )
    async with oauth_vendor() as (vendor, base):
        assert await store(tmp_path, base).api_key("anthropic") == "live"
    assert vendor.requests == []


async def test_concurrent_requests_refresh_once(tmp_path: Path) -> None:
    write_auth(tmp_path / "auth.json", {"anthropic": expired()})
    async with oauth_vendor() as (vendor, base):
        vendor.hold = trio.Event()
        vendor.script(
            "/v1/oauth/token", 200, {"access_token": "A", "refresh_token": "R", "expires_in": 3600}
        )
        credentials = store(tmp_path, base)
        keys: list[str | None] = []

        async def use() -> None:
            keys.append(await credentials.api_key("anthropic"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(use)
            nursery.start_soon(use)
            await vendor.arrived.wait()  # the first refresh is at the vendor, held there
            await trio.testing.wait_all_tasks_blocked()
            vendor.hold.set()
    assert keys == ["A", "A"]
    assert len(vendor.requests) == 1


async def test_another_process_refreshing_under_the_lock_wins(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    write_auth(path, {"anthropic": expired()})
    lock_path(path).mkdir()  # pi (another process) holds the lock, refreshing
    async with oauth_vendor() as (vendor, base):
        credentials = store(tmp_path, base)
        keys: list[str | None] = []

        async def use() -> None:
            keys.append(await credentials.api_key("anthropic"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(use)
            await trio.testing.wait_all_tasks_blocked()  # it found the lock taken and waits
            assert keys == []
            fresh = {**expired(), "access": "by-pi", "expires": int(NOW * 1000) + 60_000}
            write_auth(path, {"anthropic": fresh})
            lock_path(path).rmdir()
    assert keys == ["by-pi"]
    assert vendor.requests == []


async def test_a_stale_lock_is_broken(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    write_auth(path, {"anthropic": expired()})
    lock_path(path).mkdir()
    old = time.time() - 31  # older than pi's 30 s stale age (the lock's age is wall time)
    os.utime(lock_path(path), (old, old))
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/v1/oauth/token", 200, {"access_token": "A", "refresh_token": "R", "expires_in": 3600}
        )
        assert await store(tmp_path, base).api_key("anthropic") == "A"
    assert not lock_path(path).exists()


@pytest.mark.parametrize(
    ("status", "reply", "reason"),
    [
        (400, {"error": "invalid_grant", "echo": "old-refresh"}, "answered HTTP 400"),
        (200, b"not json old-refresh", "returned invalid JSON"),
        (200, {"access_token": "x", "expires_in": 60}, "has no refresh_token"),
    ],
)
async def test_a_failed_refresh_names_the_cause_and_keeps_the_file(
    tmp_path: Path, status: int, reply: Any, reason: str
) -> None:
    path = tmp_path / "auth.json"
    write_auth(path, {"anthropic": expired()})
    before = path.read_bytes()
    async with oauth_vendor() as (vendor, base):
        vendor.script("/v1/oauth/token", status, reply)
        credentials = store(tmp_path, base)
        with pytest.raises(CredentialError) as info:
            await credentials.api_key("anthropic")
    message = str(info.value)
    assert message.startswith("Failed to refresh OAuth token for anthropic: ")
    assert reason in message
    assert "pitrio login anthropic" in message
    assert "old-refresh" not in message and "old-access" not in message
    assert path.read_bytes() == before
    assert not lock_path(path).exists()


async def test_an_unreachable_endpoint_is_a_clear_error(tmp_path: Path) -> None:
    write_auth(tmp_path / "auth.json", {"anthropic": expired()})
    async with oauth_vendor() as (_vendor, base):
        pass  # closed again: nothing listens on that port any more
    with pytest.raises(CredentialError, match="could not be reached"):
        await store(tmp_path, base).api_key("anthropic")


def test_an_anthropic_oauth_token_goes_as_claude_code_does() -> None:
    from pitrio.actors.model_router.providers.anthropic import build_request
    from pitrio.actors.model_router.providers.base import ProviderSettings
    from pitrio.messages.model import StreamOptions
    from tests.actors.providers.support import CONTEXT, make_model

    model = make_model("anthropic-messages")
    token = "sk-ant-oat01-abcdef"
    request = build_request(
        model, CONTEXT, StreamOptions(), api_key=token, headers={}, settings=ProviderSettings()
    )
    assert request.headers["authorization"] == f"Bearer {token}"
    assert "x-api-key" not in request.headers
    beta = request.headers["anthropic-beta"].split(",")
    assert beta[:2] == ["claude-code-20250219", "oauth-2025-04-20"]
    assert request.headers["user-agent"] == "claude-cli/2.1.75"
    assert request.headers["x-app"] == "cli"
    system = request.json()["system"]
    assert [block["text"] for block in system] == [
        "You are Claude Code, Anthropic's official CLI for Claude.",
        "You are terse.",
    ]
    assert all(block["cache_control"] == {"type": "ephemeral"} for block in system)
    plain = build_request(
        model, CONTEXT, StreamOptions(), api_key="sk-ant-api03-x", headers={},
        settings=ProviderSettings(),
    )  # fmt: skip
    assert plain.headers["x-api-key"] == "sk-ant-api03-x"
    assert "user-agent" not in plain.headers
    assert len(plain.json()["system"]) == 1


def test_copilot_requests_go_to_the_host_its_token_names(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    default = "https://api.individual.githubcopilot.com"
    credentials = Credentials(auth_path=path, env={})
    assert credentials.base_url("github-copilot", default) == default  # no login yet
    live = {**expired(), "expires": 2**62}
    write_auth(
        path,
        {
            "github-copilot": {
                **live,
                "access": "tid=1;proxy-ep=proxy.business.githubcopilot.com;x=2",
            }
        },
    )
    credentials.reload()
    assert (
        credentials.base_url("github-copilot", default) == "https://api.business.githubcopilot.com"
    )
    assert (
        credentials.base_url("anthropic", "https://api.anthropic.com")
        == "https://api.anthropic.com"
    )
    write_auth(
        path,
        {
            "github-copilot": {
                **live,
                "access": "opaque",
                "enterpriseUrl": "https://ghe.example.com/",
            }
        },
    )
    credentials.reload()
    assert credentials.base_url("github-copilot", default) == "https://copilot-api.ghe.example.com"


async def test_a_copilot_request_is_prepared_for_the_tokens_host(tmp_path: Path) -> None:
    from pitrio.actors.model_router.providers.http import HttpPool
    from pitrio.messages.model import StreamOptions
    from tests.actors.providers.support import CONTEXT, make_model, make_provider

    path = tmp_path / "auth.json"
    token = "tid=1;proxy-ep=proxy.business.githubcopilot.com"
    write_auth(path, {"github-copilot": {**expired(), "access": token, "expires": 2**62}})
    provider = make_provider("openai-completions", HttpPool(), Credentials(auth_path=path, env={}))
    model = make_model(
        "openai-completions", "https://api.individual.githubcopilot.com", provider="github-copilot"
    )
    request = await provider.prepare(model, CONTEXT, StreamOptions())
    assert request.url == "https://api.business.githubcopilot.com/chat/completions"
    assert request.headers["authorization"] == f"Bearer {token}"


def test_device_poll_replies() -> None:
    assert oauth.parse_device_poll(b'{"access_token": "gho_1"}', 5).token == "gho_1"
    assert oauth.parse_device_poll(b'{"error": "authorization_pending"}', 5) == oauth.PollResult(
        wait=True
    )
    slow = oauth.parse_device_poll(b'{"error": "slow_down", "interval": 10}', 5)
    assert (slow.wait, slow.interval) == (True, 10.0)
    assert oauth.parse_device_poll(b'{"error": "slow_down"}', 5).interval == 10.0  # +5 s
    with pytest.raises(CredentialError, match=r"^Device flow failed: expired_token$"):
        oauth.parse_device_poll(b'{"error": "expired_token"}', 5)
    with pytest.raises(CredentialError, match="Invalid device code response fields"):
        oauth.parse_device_code(b'{"device_code": "d", "user_code": "u"}')


def test_pkce_pair_is_s256_of_the_verifier() -> None:
    pair = oauth.make_pkce(bytes(range(32)))
    assert pair.verifier == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
    digest = hashlib.sha256(pair.verifier.encode()).digest()
    assert pair.challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert "=" not in pair.challenge and "+" not in pair.challenge


async def test_pitrio_waits_for_the_lock_held_by_proper_lockfile(tmp_path: Path) -> None:
    """pi's own lock library holds auth.json; pitrio waits, then refreshes once it is free."""

    from tests.interop.pi_install import find_pi_cli, node_for

    cli, reason = find_pi_cli()
    node = None if cli is None else node_for(cli)
    if cli is None or node is None:
        pytest.skip(reason or "node is not installed beside pi")
    modules = cli.parents[3]  # .../node_modules
    path = tmp_path / "auth.json"
    write_auth(path, {"anthropic": expired()})
    script = (
        "const l = require('proper-lockfile');"
        f"const release = l.lockSync({str(path)!r}, {{realpath: false}});"
        "console.log('locked');"
        "process.stdin.once('data', () => { release(); console.log('released'); });"
    )
    env = {**os.environ, "NODE_PATH": str(modules)}
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/v1/oauth/token", 200, {"access_token": "A", "refresh_token": "R", "expires_in": 3600}
        )
        process = await trio.lowlevel.open_process(
            [str(node), "-e", script], env=env, stdin=-1, stdout=-1
        )
        try:
            assert process.stdout is not None and process.stdin is not None
            assert await process.stdout.receive_some(100) == b"locked\n"
            assert lock_path(path).is_dir()
            credentials = store(tmp_path, base)
            keys: list[str | None] = []

            async def use() -> None:
                keys.append(await credentials.api_key("anthropic"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(use)
                await trio.testing.wait_all_tasks_blocked()  # it found pi's lock and waits
                assert keys == [] and vendor.requests == []
                await process.stdin.send_all(b"go\n")
                assert await process.stdout.receive_some(100) == b"released\n"
        finally:
            process.kill()
            await process.wait()
    assert keys == ["A"]
    assert len(vendor.requests) == 1


async def test_copilot_requests_carry_pis_dynamic_headers(tmp_path: Path) -> None:
    from pitrio.actors.model_router.providers.http import HttpPool
    from pitrio.messages import ImageContent, user_message
    from pitrio.messages.model import LlmContext, StreamOptions
    from tests.actors.providers.support import CONTEXT, make_model, make_provider, tool_turn

    path = tmp_path / "auth.json"
    token = "tid=1;proxy-ep=proxy.individual.githubcopilot.com"
    write_auth(path, {"github-copilot": {**expired(), "access": token, "expires": 2**62}})
    credentials = Credentials(auth_path=path, env={})
    for api in ("openai-completions", "anthropic-messages"):
        provider = make_provider(api, HttpPool(), credentials)
        model = make_model(api, provider="github-copilot")
        first = await provider.prepare(model, CONTEXT, StreamOptions())
        headers = {k.lower(): v for k, v in first.headers.items()}
        assert headers["x-initiator"] == "user"
        assert headers["openai-intent"] == "conversation-edits"
        assert "copilot-vision-request" not in headers
        assert headers["authorization"] == f"Bearer {token}"
        assert "x-api-key" not in headers
        picture = user_message("look", (ImageContent(data="aGk=", mime_type="image/png"),))
        turn = tool_turn(api)
        after_tool = LlmContext(
            system_prompt="s", messages=(picture, *turn.messages), tools=turn.tools
        )
        later = await provider.prepare(model, after_tool, StreamOptions())
        headers = {k.lower(): v for k, v in later.headers.items()}
        assert headers["x-initiator"] == "agent"
        assert headers["copilot-vision-request"] == "true"
    other = make_model("openai-completions")
    plain = await make_provider("openai-completions", HttpPool(), credentials).prepare(
        other, CONTEXT, StreamOptions(api_key="k")
    )
    assert "x-initiator" not in {k.lower() for k in plain.headers}
