"""The terminal login flows of pi's OAuth providers: the code is pasted, or GitHub's device code.

* ``anthropic`` and ``openai-codex``: authorization code with PKCE. pitrio prints the URL to
  open; the user pastes the code (or the whole redirect URL) the browser ends on. pi also runs
  a callback server on the redirect port; pitrio does not (a terminal may be on another
  machine than the browser), which is why the redirect URL is accepted as pasted text.
* ``github-copilot``: GitHub's device flow: pitrio prints the verification URL and the user
  code, polls until the user has approved, then exchanges the GitHub token for a Copilot token.
  Then, as pi, it accepts the policy of every Copilot model of the built-in catalogue at once
  (:func:`enable_copilot_models`); a model that refuses does not fail the login.

The flows talk to the user through two callables (``show`` a line, ``ask`` for one), so the
CLI shell and the tests drive them the same way. The credentials returned are what
:func:`pitrio.actors.model_router.auth_file.save_entry` stores under ``"type": "oauth"``.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from pitrio.actors.model_router import oauth
from pitrio.actors.model_router.credentials import send_oauth_request
from pitrio.errors import CredentialError

Show = Callable[[str], None]
Ask = Callable[[str], Awaitable[str]]

INITIAL_POLL_MULTIPLIER = 1.2
SLOW_DOWN_POLL_MULTIPLIER = 1.4
"""pi waits a little longer than GitHub's interval, and longer still after ``slow_down``."""


async def login(provider: str, show: Show, ask: Ask, env: Mapping[str, str]) -> dict[str, Any]:
    """Run ``provider``'s login flow; the credentials to store. Raises :class:`CredentialError`."""
    if provider in ("anthropic", "openai-codex"):
        return await _pasted_code_login(provider, show, ask, env)
    if provider == "github-copilot":
        return await _device_login(show, ask, env)
    known = ", ".join(oauth.PROVIDER_NAMES)
    raise CredentialError(f"Unknown OAuth provider: {provider} (known: {known})")


async def _pasted_code_login(
    provider: str, show: Show, ask: Ask, env: Mapping[str, str]
) -> dict[str, Any]:
    pkce = oauth.make_pkce()
    # pi's state: the verifier itself for Anthropic, 16 random bytes in hex for Codex.
    state = pkce.verifier if provider == "anthropic" else secrets.token_hex(16)
    show(f"Open this URL in a browser and log in to {oauth.PROVIDER_NAMES[provider]}:")
    show(oauth.authorize_url(provider, pkce, state, env))
    pasted = await ask("Paste the authorization code (or full redirect URL): ")
    code, pasted_state = oauth.parse_pasted_code(pasted)
    if pasted_state is not None and pasted_state != state:
        raise CredentialError("OAuth state mismatch: the pasted URL is from another login")
    if not code:
        raise CredentialError("Missing authorization code")
    show("Exchanging authorization code for tokens...")
    request = oauth.code_exchange_request(provider, code, pasted_state or state, pkce, env)
    body = await send_oauth_request(request, provider)
    return oauth.parse_token_response(provider, body)


def next_wait(interval_s: float, multiplier: float, remaining_s: float) -> float:
    """How long to wait before the next device-flow poll (pi's schedule, pure)."""
    return max(0.0, min(math.ceil(max(1.0, interval_s) * multiplier * 1000) / 1000, remaining_s))


async def _device_login(show: Show, ask: Ask, env: Mapping[str, str]) -> dict[str, Any]:
    answer = await ask("GitHub Enterprise URL/domain (blank for github.com): ")
    enterprise = oauth.normalize_domain(answer)
    if answer.strip() and enterprise is None:
        raise CredentialError(f"Invalid GitHub Enterprise URL/domain: {answer.strip()!r}")
    domain = enterprise or "github.com"
    body = await send_oauth_request(oauth.device_code_request(domain, env), "github-copilot")
    device = oauth.parse_device_code(body)
    show(f"Open {device.verification_uri} and enter code: {device.user_code}")
    github_token = await _poll(domain, device, env)
    entry: dict[str, Any] = {"refresh": github_token}
    if enterprise:
        entry["enterpriseUrl"] = enterprise
    request = oauth.refresh_request("github-copilot", entry, env)
    reply = await send_oauth_request(request, "github-copilot")
    credentials = oauth.parse_token_response("github-copilot", reply, previous=entry)
    show("Enabling models...")
    await enable_copilot_models(credentials["access"], enterprise, copilot_model_ids(), env)
    return credentials


def copilot_model_ids() -> tuple[str, ...]:
    """The ids of the built-in catalogue's GitHub Copilot models (pi enables exactly these)."""
    from pitrio.actors.model_router import catalogue

    return tuple(model.id for model in catalogue.models() if model.provider == "github-copilot")


async def enable_copilot_models(
    access: str, enterprise: str | None, model_ids: tuple[str, ...], env: Mapping[str, str]
) -> dict[str, bool]:
    """Accept the policy of each of ``model_ids`` for the account of ``access``, all at once;
    whether each was accepted (a 2xx answer). A failure (refused, unreachable, no answer within
    the OAuth timeout) is only recorded: pi ignores it, the model may need no policy."""
    accepted: dict[str, bool] = {}

    async def enable(model_id: str) -> None:
        request = oauth.copilot_policy_request(access, enterprise, model_id, env)
        try:
            await send_oauth_request(request, "github-copilot")
        except CredentialError:
            accepted[model_id] = False
        else:
            accepted[model_id] = True

    async with trio.open_nursery() as nursery:
        for model_id in model_ids:
            nursery.start_soon(enable, model_id)
    return accepted


async def _poll(domain: str, device: oauth.DeviceCode, env: Mapping[str, str]) -> str:
    deadline = time.monotonic() + device.expires_in
    interval, multiplier, slowed = device.interval, INITIAL_POLL_MULTIPLIER, False
    while (remaining := deadline - time.monotonic()) > 0:
        await trio.sleep(next_wait(interval, multiplier, remaining))
        request = oauth.device_poll_request(domain, device.device_code, env)
        result = oauth.parse_device_poll(
            await send_oauth_request(request, "github-copilot"), interval
        )
        if result.token is not None:
            return result.token
        if result.interval is not None:
            interval, multiplier, slowed = result.interval, SLOW_DOWN_POLL_MULTIPLIER, True
    if slowed:
        raise CredentialError(
            "Device flow timed out after one or more slow_down responses (often a clock "
            "drift in a VM or WSL: sync the clock and try again)"
        )
    raise CredentialError("Device flow timed out")
