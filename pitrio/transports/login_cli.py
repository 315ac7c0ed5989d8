"""``pitrio auth login`` / ``pitrio auth logout`` (and ``pitrio login``, the same login).

``login <provider>``: a subscription provider (anthropic, openai-codex, github-copilot) signs
in with its account (OAuth); any other provider, or ``--api-key``, stores an API key read
from stdin. Prompts and the URL to open are written to stdout, the answers read from stdin one
line each. The credential goes to the agent dir's ``auth.json`` (``$PITRIO_AGENT_DIR``; point it
at pi's agent dir to share it with pi) as pi stores it. ``logout <provider>`` removes the
stored entry; environment variables and ``models.json`` stay as they are. Messages and exit
codes are pi 1.6.0's (0 done, 1 not); unlike pi, the login also runs on pipes.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import trio

from pitrio.errors import PitrioError
from pitrio.sdk.auth import (
    provider_env_vars,
    read_auth_document,
    save_api_key,
    try_lock,
    unlock,
    write_auth_document,
)
from pitrio.sdk.oauth import AUTH_FILE_NAME, PROVIDER_NAMES, agent_dir, login, save_entry

PROVIDER_DISPLAY_NAMES = {
    "amazon-bedrock": "Amazon Bedrock",
    "ant-ling": "Ant Ling",
    "anthropic": "Anthropic",
    "azure": "Azure",
    "baseten": "Baseten",
    "cerebras": "Cerebras",
    "cloudflare-ai-gateway": "Cloudflare AI Gateway",
    "cloudflare-workers-ai": "Cloudflare Workers AI",
    "deepseek": "DeepSeek",
    "fireworks": "Fireworks",
    "github-copilot": "GitHub Copilot",
    "google": "Google",
    "google-vertex": "Google Vertex AI",
    "groq": "Groq",
    "huggingface": "Hugging Face",
    "kimi-coding": "Kimi For Coding",
    "meta": "Meta",
    "minimax": "MiniMax",
    "minimax-cn": "MiniMax CN",
    "mistral": "Mistral",
    "moonshotai": "Moonshot AI",
    "moonshotai-cn": "Moonshot AI CN",
    "nvidia": "NVIDIA",
    "openai": "OpenAI",
    "openai-codex": "OpenAI Codex",
    "opencode": "OpenCode Zen",
    "opencode-go": "OpenCode Go",
    "openrouter": "OpenRouter",
    "qwen-token-plan": "Qwen Token Plan Team",
    "qwen-token-plan-cn": "Qwen Token Plan Team CN",
    "qwen-token-plan-individual": "Qwen Token Plan Individual",
    "qwen-token-plan-individual-cn": "Qwen Token Plan Individual CN",
    "together": "Together",
    "typesafe": "TypeSafe",
    "vercel-ai-gateway": "Vercel AI Gateway",
    "xai": "xAI",
    "xiaomi": "Xiaomi",
    "xiaomi-token-plan-ams": "Xiaomi Token Plan AMS",
    "xiaomi-token-plan-cn": "Xiaomi Token Plan CN",
    "xiaomi-token-plan-sgp": "Xiaomi Token Plan SGP",
    "zai": "Z.AI",
    "zai-coding-cn": "Z.AI Coding CN",
}
"""The names pi 1.6.0 gives the built-in providers in its messages (``@earendil-works/pi-ai``'s
provider definitions); any other provider is named by its id."""

LOGIN_USAGE = "pitrio auth login <provider> [--api-key] [--no-browser]"
LOGOUT_USAGE = "pitrio auth logout <provider>"


def _show(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _error(line: str) -> None:
    sys.stderr.write(line + "\n")


async def _ask(prompt: str) -> str:
    sys.stdout.write(prompt)
    sys.stdout.flush()
    line: str = await trio.to_thread.run_sync(sys.stdin.readline)
    if not line:
        raise PitrioError("no answer: stdin was closed")
    return line.rstrip("\n")


def _known_providers(env: dict[str, str]) -> list[str]:
    """Every provider of the catalogue and ``models.json``, and the subscription ones."""
    from pitrio.sdk.models import ModelRouter, RouterConfig

    router = ModelRouter.from_config(RouterConfig.from_environment(env))
    names = {model.provider for model in router.registry.list() if model.provider != "faux"}
    return sorted(names | set(PROVIDER_NAMES))


def _display_name(provider: str) -> str:
    return PROVIDER_DISPLAY_NAMES.get(provider, provider)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pitrio login`` (also read by the completion script)."""
    parser = argparse.ArgumentParser(prog="pitrio login", description=__doc__.splitlines()[0])
    parser.add_argument("provider")
    parser.add_argument("--api-key", action="store_true", help="store an API key")
    parser.add_argument("--no-browser", action="store_true", help="accepted; no browser opens")
    return parser


def login_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio login`` (pi 1.6.0's ``auth login``, kept as an alias)."""
    return login_command([word for word in argv if word != "--offline"])


def login_command(argv: Sequence[str]) -> int:
    """``pitrio auth login <provider> [--api-key] [--no-browser]``; returns the exit code."""
    provider = ""
    api_key = False
    browser = True
    for word in argv:
        if word == "--api-key":
            api_key = True
        elif word == "--no-browser":
            browser = False
        elif word.startswith("-") or provider:
            _error(f"Usage: {LOGIN_USAGE}")
            return 1
        else:
            provider = word
    if not provider:
        _error(f"Usage: {LOGIN_USAGE}")
        return 1
    if api_key and not browser:
        _error("--no-browser only applies to account sign-in; omit it with --api-key.")
        return 1
    env = dict(os.environ)
    known = _known_providers(env)
    if provider not in known:
        _error(f'Unknown provider "{provider}".')
        _error(f"Providers: {', '.join(known)}")
        return 1
    path = agent_dir(env) / AUTH_FILE_NAME
    name = _display_name(provider)
    oauth = provider in PROVIDER_NAMES and not api_key
    if api_key and provider in PROVIDER_NAMES and not provider_env_vars().get(provider):
        _error(f"{name} has no API key login. Omit --api-key to sign in.")
        return 1
    try:
        if oauth:
            credentials = trio.run(login, provider, _show, _ask, env)
            save_entry(path, provider, {"type": "oauth", **credentials})
        else:
            key = _read_key(provider)
            if not key:
                _error(f"Failed to log in to {name}: no API key given")
                return 1
            save_api_key(path, provider, key)
    except PitrioError as exc:
        _error(f"Failed to log in to {name}: {exc}")
        return 1
    except KeyboardInterrupt:
        _error("Login cancelled.")
        return 130
    what = f"Logged in to {name}" if oauth else f"Saved API key for {name}"
    _show(f"{what}. Credentials saved to {path}")
    return 0


def _read_key(provider: str) -> str:
    """The API key, typed without echo on a terminal, else one line of stdin."""
    prompt = f"API key for {provider}: "
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(prompt).strip()
    sys.stdout.write(prompt)
    sys.stdout.flush()
    return (sys.stdin.readline() if sys.stdin is not None else "").strip()


def logout_command(argv: Sequence[str]) -> int:
    """``pitrio auth logout <provider>``; returns the exit code."""
    if len(argv) != 1 or argv[0].startswith("-"):
        _error(f"Usage: {LOGOUT_USAGE}")
        return 1
    provider = argv[0]
    env = dict(os.environ)
    path = agent_dir(env) / AUTH_FILE_NAME
    try:
        stored = read_auth_document(path)
    except PitrioError as exc:
        _error(f"Could not read stored credentials: {exc}")
        return 1
    name = _display_name(provider)
    if provider not in stored:
        if provider not in _known_providers(env):
            _error(f'Unknown provider "{provider}".')
            _error(f"Stored credentials: {', '.join(sorted(stored)) or 'none'}")
            return 1
        _show(
            f"No stored credentials for {name}. "
            "Environment variables and models.json config are unchanged."
        )
        return 0
    try:
        kind = _remove_entry(path, provider)
    except (OSError, PitrioError) as exc:
        _error(f"Logout failed: {exc}")
        return 1
    if kind == "oauth":
        _show(f"Logged out of {name}.")
    else:
        _show(
            f"Removed stored API key for {name}. "
            "Environment variables and models.json config are unchanged."
        )
    return 0


def _remove_entry(path: Path, provider: str) -> object:
    """Drop ``provider``'s entry under pi's lock on ``auth.json``; the removed entry's type."""
    for _attempt in range(50):
        if try_lock(path, time.time()):
            break
        time.sleep(0.1)
    else:
        raise PitrioError(f"{path}.lock is held by another process")
    try:
        document = read_auth_document(path)
        removed = document.pop(provider, None)
        write_auth_document(path, document)
    finally:
        unlock(path)
    return removed.get("type") if isinstance(removed, dict) else None
