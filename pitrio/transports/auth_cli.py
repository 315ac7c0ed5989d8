"""``pitrio auth``: pi 1.6.0's ``pi auth`` subcommands.

``login <provider> [--api-key] [--no-browser]`` signs in to a subscription provider (OAuth) or
saves an API key; ``logout <provider>`` removes the stored credential; ``print-api-key`` and
``print-bearer-token`` print the credential a request would use (``--provider`` and/or
``--model``); ``check`` prints ``ready``, ``not_ready`` or ``invalid`` and exits 0, 1 or 2
(``--json``, ``--credentials``, ``--no-refresh``). Credentials are resolved exactly as a
session resolves them (:mod:`pitrio.actors.model_router.credentials`): ``auth.json`` with its
value templates, ``models.json``'s ``apiKey``, the environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import trio

from pitrio.errors import AuthFileError, CredentialError, ModelsJsonError, PitrioError
from pitrio.messages.model import Model
from pitrio.sdk.auth import (
    MODELS_FILE_NAME,
    PROVIDER_NAMES,
    OAuthEntry,
    load_auth_file,
    load_models_json,
)
from pitrio.sdk.models import ModelRouter, RouterConfig
from pitrio.transports.auth_request import AuthRequest, AuthUsageError, parse_auth_request

HELP = """Usage:
  pitrio auth login <provider> [--api-key] [--no-browser]
  pitrio auth logout <provider>
  pitrio auth print-api-key [--provider <provider>] [--model <model>]
  pitrio auth print-bearer-token [--provider <provider>] [--model <model>] [--min-expiry <duration>]
  pitrio auth check [--provider <provider>] [--model <model>] [--json] [--credentials]
                    [--no-refresh]

Sign in to model providers or out of them, print the credential a request would use (for
another client), or check that a provider can be used. Credentials live in the agent dir's
auth.json ($PITRIO_AGENT_DIR, default ~/.pitrio/agent).

Commands:
  login <provider>        Sign in with a subscription account, or store an API key (--api-key)
  logout <provider>       Remove the stored credential (environment and models.json untouched)
  print-api-key           Print the API key a request to the provider would send
  print-bearer-token      Print the OAuth access token (renewed when it expires too soon)
  check                   Print ready, not_ready or invalid; exit 0, 1 or 2

Options of print-api-key, print-bearer-token and check (one of the two is needed):
  --provider <provider>   The provider whose credential to resolve
  --model <model>         The model whose provider's credential to resolve

Options of login:
  --api-key               Store an API key instead of signing in with an account
  --no-browser            Accepted: pitrio prints the sign-in URL and never opens a browser

Other options:
  --min-expiry <duration> print-bearer-token: the least lifetime left, e.g. 30m or 1h (default 30m)
  --json                  check: print the result as a JSON object
  --credentials           check: print the credential (or add it to the JSON)
  --no-refresh            check: neither run key commands nor renew an expired token"""


def auth_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio auth``; returns the exit code."""
    words = list(argv)
    if not words or words[0] == "help" or "--help" in words or "-h" in words:
        sys.stdout.write(HELP + "\n")
        return 0
    if words[0] in ("login", "logout"):
        from pitrio.transports.login_cli import login_command, logout_command

        rest = [word for word in words[1:] if word != "--offline"]
        code: int = login_command(rest) if words[0] == "login" else logout_command(rest)
        return code
    try:
        request = parse_auth_request(words)
    except AuthUsageError as exc:
        return _usage(exc)
    code = trio.run(run_credential_command, request, dict(os.environ))
    return int(code)


def _usage(exc: AuthUsageError) -> int:
    for line in exc.lines or (f"Error: {exc}",):
        sys.stderr.write(line + "\n")
    return exc.code


async def run_credential_command(request: AuthRequest, env: Mapping[str, str]) -> int:
    """Run a parsed ``print-*`` or ``check`` command, writing its output; the exit code."""
    router = ModelRouter.from_config(RouterConfig.from_environment(env))
    if request.kind == "check":
        return await _check(request, router)
    try:
        value = await resolve_credential(request, router)
    except AuthUsageError as exc:
        return _usage(exc)
    sys.stdout.write(value + "\n")
    return 0


# -- print-api-key / print-bearer-token --------------------------------------------------------


def _stored_types(router: ModelRouter) -> dict[str, str]:
    """``auth.json``'s providers and the type of each entry (``oauth`` / ``api_key``)."""
    path = router.credentials.auth_path
    if path is None:
        return {}
    try:
        entries = load_auth_file(path)
    except AuthFileError as exc:
        raise AuthUsageError(str(exc)) from None
    return {
        provider: "oauth" if isinstance(entry, OAuthEntry) else "api_key"
        for provider, entry in entries.items()
    }


def _providers(router: ModelRouter) -> list[str]:
    """Every provider with a model, in registration order (faux left out: it has no key)."""
    seen: dict[str, None] = {}
    for model in router.registry.list():
        if model.provider != "faux":
            seen.setdefault(model.provider, None)
    return list(seen)


def _model_matches(model: Model, pattern: str) -> bool:
    """``id``, ``provider/id``, or a piece of the id (case-insensitive)."""
    wanted = pattern.lower()
    return wanted in (model.id.lower(), model.ref.lower()) or wanted in model.id.lower()


async def _credential_of(router: ModelRouter, provider: str, min_validity_ms: int) -> str | None:
    credentials = router.credentials
    previous = credentials.min_validity_ms
    credentials.min_validity_ms = min_validity_ms
    try:
        return await credentials.api_key(provider)
    except CredentialError:
        return None
    finally:
        credentials.min_validity_ms = previous


async def resolve_credential(request: AuthRequest, router: ModelRouter) -> str:
    """The one credential ``request`` names; :class:`AuthUsageError` with pi's message when
    there is none, several, or the provider or model is unknown."""
    bearer = request.kind == "bearer_token"
    types = _stored_types(router)
    providers = _providers(router)
    if request.provider:
        if request.provider not in providers:
            raise AuthUsageError(
                f'Unknown provider "{request.provider}". '
                "Use --list-models to see available providers."
            )
        candidates = [request.provider]
    else:
        assert request.model is not None
        candidates = [
            provider
            for provider in providers
            if provider in types
            and any(
                m.provider == provider and _model_matches(m, request.model)
                for m in router.registry.list()
            )
        ]
        if not candidates:
            raise AuthUsageError(
                f'Model "{request.model}" not found. Use --list-models to see available models.'
            )
    found: list[tuple[str, str]] = []
    for provider in candidates:
        oauth = types.get(provider) == "oauth"
        if oauth != bearer:
            continue
        if bearer and provider not in PROVIDER_NAMES:
            continue  # a token pitrio cannot use or renew
        value = await _credential_of(router, provider, request.min_expiry_ms if bearer else 0)
        if value:
            found.append((provider, value))
    if len(found) == 1:
        return found[0][1]
    if found:
        names = ", ".join(provider for provider, _ in found)
        raise AuthUsageError(
            f"Multiple configured providers matched ({names}). Specify --provider."
        )
    first = candidates[0]
    if request.provider and not bearer and types.get(first) == "oauth":
        raise AuthUsageError(f'Provider "{first}" is configured with OAuth, not an API key')
    if request.provider and bearer and types.get(first) != "oauth":
        raise AuthUsageError(f'Provider "{first}" is not configured with an OAuth bearer token')
    what = "OAuth bearer token" if bearer else "API key"
    raise AuthUsageError(f"No usable {what} is configured")


# -- check ---------------------------------------------------------------------------------


async def check_provider(request: AuthRequest, router: ModelRouter) -> dict[str, Any]:
    """``{"status": "ready", "provider", "authType"}`` or ``{"status": "not_ready" |
    "invalid", "provider", "reason"}`` (pi 1.6.0's result object)."""
    provider = request.provider
    if request.model:
        pattern = f"{provider}/{request.model}" if provider else request.model
        try:
            model, _ = router.registry.resolve_pattern(pattern)
        except PitrioError:
            return {"status": "invalid", "provider": request.model, "reason": "invalid_state"}
        provider = model.provider
    assert provider is not None
    invalid = {"status": "invalid", "provider": provider, "reason": "invalid_state"}
    agent = router.credentials.auth_path.parent if router.credentials.auth_path else None
    try:
        if agent is not None:
            load_models_json(agent / MODELS_FILE_NAME)
        types = _stored_types(router)
    except (ModelsJsonError, AuthUsageError):
        return invalid
    if provider not in _providers(router):
        return {"status": "not_ready", "provider": provider, "reason": "provider_not_found"}
    not_configured = {
        "status": "not_ready",
        "provider": provider,
        "reason": "credentials_not_configured",
    }
    oauth = types.get(provider) == "oauth"
    if oauth and provider not in PROVIDER_NAMES:
        return not_configured  # a stored token for a provider without OAuth
    if not router.credentials.configured(provider):
        return not_configured
    if not request.no_refresh and await _credential_of(router, provider, 0) is None:
        return not_configured
    return {"status": "ready", "provider": provider, "authType": "oauth" if oauth else "api_key"}


async def _check(request: AuthRequest, router: ModelRouter) -> int:
    result = await check_provider(request, router)
    credential = None
    if request.credentials and result["status"] == "ready":
        credential = await _credential_of(router, result["provider"], 0)
        if not credential:
            result = {
                "status": "not_ready",
                "provider": result["provider"],
                "reason": "credential_not_available",
            }
    if request.json:
        document = {**result, **({"credentials": credential} if credential else {})}
        sys.stdout.write(orjson.dumps(document).decode() + "\n")
    else:
        sys.stdout.write(f"{credential or result['status']}\n")
    return {"ready": 0, "not_ready": 1}.get(result["status"], 2)


def build_parser() -> Any:
    """The argument parser of ``pitrio auth`` for the completion script (the command itself
    parses its words as pi 1.6.0 does)."""
    import argparse

    parser = argparse.ArgumentParser(prog="pitrio auth", description="log in, out, print keys")
    commands = parser.add_subparsers(dest="auth_command")
    login = commands.add_parser("login", help="sign in, or store an API key")
    login.add_argument("provider")
    login.add_argument("--api-key", action="store_true")
    login.add_argument("--no-browser", action="store_true")
    logout = commands.add_parser("logout", help="remove a stored credential")
    logout.add_argument("provider")
    for name in ("print-api-key", "print-bearer-token", "check"):
        sub = commands.add_parser(name)
        sub.add_argument("--provider")
        sub.add_argument("--model")
        if name == "print-bearer-token":
            sub.add_argument("--min-expiry")
        if name == "check":
            for flag in ("--json", "--credentials", "--no-refresh"):
                sub.add_argument(flag, action="store_true")
    return parser
