"""OAuth facts of the subscription providers pi logs in to, as pure request builders and parsers.

pi 0.73.1 (pi-ai's ``utils/oauth``) knows three: ``anthropic`` (Claude Pro/Max),
``openai-codex`` (ChatGPT Plus/Pro) and ``github-copilot``. Their ``auth.json`` entry is
``{"type": "oauth", "refresh": ..., "access": ..., "expires": <ms>, ...}`` with extra fields
kept as they are (``accountId`` for Codex, ``enterpriseUrl`` for Copilot). Nothing here does
I/O: :mod:`pitrio.actors.model_router.credentials` sends the requests built here and stores
what the parsers return; :mod:`pitrio.actors.model_router.oauth_login` runs the login flows.

Endpoints are pi's. ``PITRIO_OAUTH_TEST_BASE`` (for tests only) replaces the scheme and host
of every endpoint, keeping its path, so a loopback server can play all three vendors.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from pitrio.errors import CredentialError

TEST_BASE_ENV = "PITRIO_OAUTH_TEST_BASE"
EXPIRY_MARGIN_MS = 5 * 60 * 1000
"""pi stores Anthropic's and Copilot's expiry five minutes early (not Codex's)."""

ANTHROPIC_CLIENT_ID = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
ANTHROPIC_AUTHORIZE_URL = "https://claude.ai/oauth/authorize"
ANTHROPIC_TOKEN_URL = "https://platform.claude.com/v1/oauth/token"
ANTHROPIC_REDIRECT_URI = "http://localhost:53692/callback"
ANTHROPIC_SCOPES = (
    "org:create_api_key user:profile user:inference user:sessions:claude_code "
    "user:mcp_servers user:file_upload"
)
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
CODEX_AUTHORIZE_URL = "https://auth.openai.com/oauth/authorize"
CODEX_TOKEN_URL = "https://auth.openai.com/oauth/token"
CODEX_REDIRECT_URI = "http://localhost:1455/auth/callback"
CODEX_SCOPE = "openid profile email offline_access"
CODEX_JWT_CLAIM = "https://api.openai.com/auth"
COPILOT_CLIENT_ID = "Iv1.b507a08c87ecfe98"
COPILOT_HEADERS = {
    "User-Agent": "GitHubCopilotChat/0.35.0",
    "Editor-Version": "vscode/1.107.0",
    "Editor-Plugin-Version": "copilot-chat/0.35.0",
    "Copilot-Integration-Id": "vscode-chat",
}

PROVIDER_NAMES = {
    "anthropic": "Anthropic (Claude Pro/Max)",
    "openai-codex": "ChatGPT Plus/Pro (Codex Subscription)",
    "github-copilot": "GitHub Copilot",
}
"""The OAuth providers pi knows, with the names pi shows."""


@attrs.frozen
class OAuthRequest:
    """One HTTP request of an OAuth exchange: ``body`` is JSON or a url-encoded form."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None = None


def endpoint(url: str, env: Mapping[str, str]) -> str:
    """``url``, or the test base's scheme and host with ``url``'s path when one is set."""
    base = env.get(TEST_BASE_ENV)
    if not base:
        return url
    path = urllib.parse.urlsplit(url).path
    return base.rstrip("/") + path


def _json_post(url: str, body: Mapping[str, str]) -> OAuthRequest:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    return OAuthRequest("POST", url, headers, orjson.dumps(dict(body)))


def _form_post(url: str, body: Mapping[str, str], **headers: str) -> OAuthRequest:
    merged = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    return OAuthRequest("POST", url, merged, urllib.parse.urlencode(body).encode())


def copilot_urls(domain: str) -> dict[str, str]:
    """The device-code, access-token and Copilot-token endpoints of a GitHub domain."""
    return {
        "device": f"https://{domain}/login/device/code",
        "access": f"https://{domain}/login/oauth/access_token",
        "copilot": f"https://api.{domain}/copilot_internal/v2/token",
    }


# -- refresh ---------------------------------------------------------------------------------


def refresh_request(
    provider: str, entry: Mapping[str, Any], env: Mapping[str, str]
) -> OAuthRequest:
    """The request that renews ``entry`` (an ``auth.json`` oauth entry) for ``provider``."""
    refresh = entry.get("refresh")
    if not isinstance(refresh, str) or not refresh:
        raise CredentialError(f"The OAuth entry of {provider} has no refresh token; log in again")
    if provider == "anthropic":
        return _json_post(
            endpoint(ANTHROPIC_TOKEN_URL, env),
            {
                "grant_type": "refresh_token",
                "client_id": ANTHROPIC_CLIENT_ID,
                "refresh_token": refresh,
            },
        )
    if provider == "openai-codex":
        return _form_post(
            endpoint(CODEX_TOKEN_URL, env),
            {"grant_type": "refresh_token", "refresh_token": refresh, "client_id": CODEX_CLIENT_ID},
        )
    if provider == "github-copilot":
        # Copilot's "refresh" is the GitHub token; the access token is exchanged for it anew.
        domain = entry.get("enterpriseUrl") or "github.com"
        url = endpoint(copilot_urls(str(domain))["copilot"], env)
        headers = {"Accept": "application/json", "Authorization": f"Bearer {refresh}"}
        return OAuthRequest("GET", url, {**headers, **COPILOT_HEADERS})
    raise CredentialError(f"Unknown OAuth provider: {provider}")


def _document(provider: str, body: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise CredentialError(
            f"The OAuth token endpoint of {provider} returned invalid JSON"
        ) from None
    if not isinstance(document, dict):
        raise CredentialError(f"The OAuth token endpoint of {provider} returned no object")
    return document


def parse_token_response(
    provider: str,
    body: bytes,
    *,
    previous: Mapping[str, Any] | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The new credentials (``refresh``, ``access``, ``expires`` and extras) from a token reply.

    ``previous`` is the entry being refreshed (Copilot keeps its GitHub token and enterprise
    domain). Raises :class:`CredentialError` naming the missing field, never a token.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    data = _document(provider, body)
    if provider == "github-copilot":
        token, expires_at = data.get("token"), data.get("expires_at")
        if not isinstance(token, str) or not isinstance(expires_at, int | float):
            raise CredentialError("Invalid Copilot token response fields")
        result: dict[str, Any] = {
            "refresh": (previous or {}).get("refresh"),
            "access": token,
            "expires": int(expires_at * 1000) - EXPIRY_MARGIN_MS,
        }
        if previous and previous.get("enterpriseUrl"):
            result["enterpriseUrl"] = previous["enterpriseUrl"]
        return result
    access, refresh, expires_in = (
        data.get("access_token"),
        data.get("refresh_token"),
        data.get("expires_in"),
    )
    if not isinstance(access, str) or not access:
        raise CredentialError(f"The OAuth token reply of {provider} has no access_token")
    if not isinstance(refresh, str) or not refresh:
        raise CredentialError(f"The OAuth token reply of {provider} has no refresh_token")
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        raise CredentialError(f"The OAuth token reply of {provider} has no expires_in")
    margin = EXPIRY_MARGIN_MS if provider == "anthropic" else 0
    result = {
        "refresh": refresh,
        "access": access,
        "expires": now + int(expires_in * 1000) - margin,
    }
    if provider == "openai-codex":
        account = codex_account_id(access)
        if account is None:
            raise CredentialError("Failed to extract accountId from token")
        result["accountId"] = account
    return result


def codex_account_id(access: str) -> str | None:
    """The ChatGPT account id in a Codex access token's JWT claims, if there is one."""
    parts = access.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, orjson.JSONDecodeError):
        return None
    auth = claims.get(CODEX_JWT_CLAIM) if isinstance(claims, dict) else None
    account = auth.get("chatgpt_account_id") if isinstance(auth, dict) else None
    return account if isinstance(account, str) and account else None


# -- login (authorization code + PKCE, pasted) -----------------------------------------------


@attrs.frozen
class Pkce:
    """A PKCE verifier and its S256 challenge (base64url, unpadded)."""

    verifier: str
    challenge: str


def make_pkce(random_bytes: bytes | None = None) -> Pkce:
    """A fresh PKCE pair from 32 random bytes (or the given ones, for tests)."""
    raw = secrets.token_bytes(32) if random_bytes is None else random_bytes
    verifier = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    digest = hashlib.sha256(verifier.encode()).digest()
    return Pkce(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode())


def authorize_url(provider: str, pkce: Pkce, state: str, env: Mapping[str, str]) -> str:
    """The URL the user opens in a browser to authorise pitrio (pi's parameters)."""
    if provider == "anthropic":
        params = {
            "code": "true",
            "client_id": ANTHROPIC_CLIENT_ID,
            "response_type": "code",
            "redirect_uri": ANTHROPIC_REDIRECT_URI,
            "scope": ANTHROPIC_SCOPES,
            "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
            "state": state,
        }
        return f"{endpoint(ANTHROPIC_AUTHORIZE_URL, env)}?{urllib.parse.urlencode(params)}"
    if provider == "openai-codex":
        params = {
            "response_type": "code",
            "client_id": CODEX_CLIENT_ID,
            "redirect_uri": CODEX_REDIRECT_URI,
            "scope": CODEX_SCOPE,
            "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
            "state": state,
            "id_token_add_organizations": "true",
            "codex_cli_simplified_flow": "true",
            "originator": "pi",
        }
        return f"{endpoint(CODEX_AUTHORIZE_URL, env)}?{urllib.parse.urlencode(params)}"
    raise CredentialError(f"{provider} has no authorization-code login")


def parse_pasted_code(text: str) -> tuple[str | None, str | None]:
    """``(code, state)`` from a pasted redirect URL, ``code#state``, query string or bare code."""
    value = text.strip()
    if not value:
        return None, None
    split = urllib.parse.urlsplit(value)
    if split.scheme and split.netloc:
        return _code_and_state(split.query)
    if "#" in value:
        code, state = value.split("#", 1)
        return code or None, state or None
    if "code=" in value:
        return _code_and_state(value)
    return value, None


def _code_and_state(query: str) -> tuple[str | None, str | None]:
    params = urllib.parse.parse_qs(query)
    code, state = params.get("code"), params.get("state")
    return (code[0] if code else None), (state[0] if state else None)


def code_exchange_request(
    provider: str, code: str, state: str, pkce: Pkce, env: Mapping[str, str]
) -> OAuthRequest:
    """The request that trades an authorization code for tokens."""
    if provider == "anthropic":
        return _json_post(
            endpoint(ANTHROPIC_TOKEN_URL, env),
            {
                "grant_type": "authorization_code",
                "client_id": ANTHROPIC_CLIENT_ID,
                "code": code,
                "state": state,
                "redirect_uri": ANTHROPIC_REDIRECT_URI,
                "code_verifier": pkce.verifier,
            },
        )
    if provider == "openai-codex":
        return _form_post(
            endpoint(CODEX_TOKEN_URL, env),
            {
                "grant_type": "authorization_code",
                "client_id": CODEX_CLIENT_ID,
                "code": code,
                "code_verifier": pkce.verifier,
                "redirect_uri": CODEX_REDIRECT_URI,
            },
        )
    raise CredentialError(f"{provider} has no authorization-code login")


# -- login (GitHub device code) --------------------------------------------------------------


def device_code_request(domain: str, env: Mapping[str, str]) -> OAuthRequest:
    """The request that starts GitHub's device flow."""
    url = endpoint(copilot_urls(domain)["device"], env)
    body = {"client_id": COPILOT_CLIENT_ID, "scope": "read:user"}
    return _form_post(
        url, body, Accept="application/json", **{"User-Agent": COPILOT_HEADERS["User-Agent"]}
    )


def device_poll_request(domain: str, device_code: str, env: Mapping[str, str]) -> OAuthRequest:
    """One poll of GitHub's token endpoint for a device code."""
    url = endpoint(copilot_urls(domain)["access"], env)
    body = {
        "client_id": COPILOT_CLIENT_ID,
        "device_code": device_code,
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
    }
    return _form_post(
        url, body, Accept="application/json", **{"User-Agent": COPILOT_HEADERS["User-Agent"]}
    )


@attrs.frozen
class DeviceCode:
    """GitHub's answer to a device-flow start."""

    device_code: str
    user_code: str
    verification_uri: str
    interval: float
    expires_in: float


def parse_device_code(body: bytes) -> DeviceCode:
    """The device-flow start reply; raises :class:`CredentialError` when a field is missing."""
    data = _document("github-copilot", body)
    try:
        return DeviceCode(
            str(_typed(data, "device_code", str)),
            str(_typed(data, "user_code", str)),
            str(_typed(data, "verification_uri", str)),
            float(_typed(data, "interval", int | float)),
            float(_typed(data, "expires_in", int | float)),
        )
    except KeyError:
        raise CredentialError("Invalid device code response fields") from None


def _typed(data: Mapping[str, Any], name: str, kind: Any) -> Any:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise KeyError(name)
    return value


@attrs.frozen
class PollResult:
    """One device-flow poll: a token, keep waiting (``slow_down`` gives a new interval), or fail."""

    token: str | None = None
    wait: bool = False
    interval: float | None = None


def parse_device_poll(body: bytes, interval: float) -> PollResult:
    """What one poll reply means; ``interval`` is the current one (seconds)."""
    data = _document("github-copilot", body)
    token = data.get("access_token")
    if isinstance(token, str) and token:
        return PollResult(token=token)
    error = data.get("error")
    if error == "authorization_pending":
        return PollResult(wait=True)
    if error == "slow_down":
        given = data.get("interval")
        new = (
            float(given) if isinstance(given, int | float) and given > 0 else max(1.0, interval + 5)
        )
        return PollResult(wait=True, interval=new)
    if isinstance(error, str):
        description = data.get("error_description")
        suffix = f": {description}" if isinstance(description, str) and description else ""
        raise CredentialError(f"Device flow failed: {error}{suffix}")
    raise CredentialError("Device flow failed: unexpected reply from GitHub")


def normalize_domain(text: str) -> str | None:
    """The host name of a GitHub Enterprise URL or domain (``None`` for an invalid one)."""
    value = text.strip()
    if not value:
        return None
    url = urllib.parse.urlsplit(value if "://" in value else f"https://{value}")
    host = url.hostname
    return host if host and all(part for part in host.split(".")) else None


def copilot_base_url(access: str, enterprise: str | None) -> str:
    """The Copilot API base URL named by the token's ``proxy-ep`` (pi's rule)."""
    for part in access.split(";"):
        if part.startswith("proxy-ep="):
            host = part[len("proxy-ep=") :]
            if host.startswith("proxy."):
                host = "api." + host[len("proxy.") :]
            return f"https://{host}"
    domain = normalize_domain(enterprise) if enterprise else None
    if domain:
        return f"https://copilot-api.{domain}"
    return "https://api.individual.githubcopilot.com"


def copilot_policy_request(
    access: str, enterprise: str | None, model_id: str, env: Mapping[str, str]
) -> OAuthRequest:
    """The request that accepts ``model_id``'s policy for the Copilot account of ``access``
    (some models, Claude's and Grok's, answer only once it is accepted): pi's endpoint
    ``{api}/models/{id}/policy``, its headers and body."""
    url = endpoint(f"{copilot_base_url(access, enterprise)}/models/{model_id}/policy", env)
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {access}",
        **COPILOT_HEADERS,
        "openai-intent": "chat-policy",
        "x-interaction-type": "chat-policy",
    }
    return OAuthRequest("POST", url, headers, orjson.dumps({"state": "enabled"}))


def copilot_dynamic_headers(messages: Sequence[Any]) -> dict[str, str]:
    """The per-request headers pi adds for GitHub Copilot (who started the turn, images)."""
    last = messages[-1] if messages else None
    initiator = "agent" if last is not None and getattr(last, "role", "") != "user" else "user"
    headers = {"X-Initiator": initiator, "Openai-Intent": "conversation-edits"}
    for message in messages:
        if getattr(message, "role", "") not in ("user", "toolResult"):
            continue
        content = getattr(message, "content", ())
        if not isinstance(content, str) and any(
            getattr(part, "type", "") == "image" for part in content
        ):
            headers["Copilot-Vision-Request"] = "true"
            break
    return headers
