"""``pitrio auth print-api-key | print-bearer-token | check | logout`` against real pi 1.6.0's
``pi auth``: the same agent directory (a copy for each) and environment must give the same
output on stdout, the same message on stderr (``pi`` read as ``pitrio``) and the same exit
code. The ``auth.json`` holds literal keys, ``$NAME`` / ``${NAME}`` templates, the ``$$`` and
``$!`` escapes, ``!command`` values (one failing), an ``env`` object, and OAuth entries of a
subscription provider and of one without OAuth; ``models.json`` adds providers with and without
their own ``apiKey``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_install import find_pi
from tests.interop.pi_oneshot import base_env, pi_argv, pitrio_argv

_NODE, _CLI, WHY = find_pi()
FAR_FUTURE = 99_999_999_999_999
AUTH = {
    "anthropic": {"type": "api_key", "key": "sk-ant-literal"},
    "openai": {"type": "api_key", "key": "$MY_OPENAI"},
    "groq": {"type": "api_key", "key": "!echo from-command"},
    "cerebras": {"type": "api_key", "key": "!exit 3"},
    "xai": {"type": "api_key", "key": "${MISSING_VAR}"},
    "zai": {"type": "api_key", "key": "$$literal$!x"},
    "deepseek": {"type": "api_key", "key": "UNSET_NAME_IS_LITERAL"},
    "mistral": {"type": "oauth", "access": "acc", "refresh": "ref", "expires": FAR_FUTURE},
    "openai-codex": {"type": "oauth", "access": "codex-acc", "refresh": "r", "expires": FAR_FUTURE},
    "local": {"type": "api_key", "key": "$SCOPED", "env": {"SCOPED": "scoped-value"}},
}
MODELS = {
    "providers": {
        "local": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "models": [{"id": "loc-1"}],
        },
        "other": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "$OTHER_KEY",
            "models": [{"id": "oth-1"}],
        },
        "lit": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "literal-models-key",
            "models": [{"id": "lit-1"}],
        },
    }
}
ENV = {"MY_OPENAI": "sk-openai-env", "XAI_API_KEY": "xai-env", "OTHER_KEY": "oth-env"}


@dataclass(frozen=True)
class Case:
    """``pi auth <args>`` / ``pitrio auth <args>``; ``expect``: (stdout, exit code)."""

    args: list[str]
    expect: tuple[str, int]
    models: Any = field(default_factory=lambda: MODELS)
    env: dict[str, str] = field(default_factory=dict)


def js(status: str, provider: str, **more: str) -> str:
    """pi's compact JSON result of ``auth check --json``."""
    return json.dumps({"status": status, "provider": provider, **more}, separators=(",", ":"))


NOT_CONFIGURED = "credentials_not_configured"
BROKEN = '{"providers": {'
REMOVED = "Removed stored API key for Anthropic. Environment variables and models.json config"


def err(text: str, code: int = 1) -> tuple[str, int]:
    """An error case: nothing on stdout (the message is compared between both)."""
    return ("", code)


CASES = [
    Case(["print-api-key", "--provider", "anthropic"], ("sk-ant-literal", 0)),
    Case(["print-api-key", "--provider", "openai"], ("sk-openai-env", 0)),
    Case(["print-api-key", "--provider", "groq"], ("from-command", 0)),
    Case(["print-api-key", "--provider", "cerebras"], err("no usable key")),
    Case(["print-api-key", "--provider", "xai"], ("xai-env", 0)),
    Case(["print-api-key", "--provider", "zai"], ("$literal!x", 0)),
    Case(["print-api-key", "--provider", "deepseek"], ("UNSET_NAME_IS_LITERAL", 0)),
    Case(["print-api-key", "--provider", "mistral"], err("oauth, not a key")),
    Case(["print-api-key", "--provider", "openai-codex"], err("oauth, not a key")),
    Case(["print-api-key", "--provider", "local"], ("scoped-value", 0)),
    Case(["print-api-key", "--provider", "other"], ("oth-env", 0)),
    Case(["print-api-key", "--provider", "lit"], ("literal-models-key", 0)),
    Case(["print-api-key", "--provider", "mistral-nope"], err("unknown provider")),
    Case(["print-api-key", "--provider", "google"], err("no key at all")),
    Case(["print-api-key", "--model", "loc-1"], ("scoped-value", 0)),
    Case(["print-api-key", "--model", "oth-1"], err("not stored in auth.json")),
    Case(
        ["print-api-key", "--provider", "anthropic", "--model", "claude-sonnet-4-5"],
        ("sk-ant-literal", 0),
    ),
    Case(["print-api-key"], err("needs a provider")),
    Case(["print-api-key", "--provider", "anthropic", "--json"], err("check only")),
    Case(["print-api-key", "--provider", "anthropic", "extra"], err("a word")),
    Case(["print-bearer-token", "--provider", "openai-codex"], ("codex-acc", 0)),
    Case(["print-bearer-token", "--provider", "mistral"], err("no OAuth there")),
    Case(["print-bearer-token", "--provider", "anthropic"], err("not OAuth")),
    Case(["print-bearer-token", "--provider", "openai-codex", "--min-expiry", "5x"], err("bad")),
    Case(["check", "--provider", "anthropic"], ("ready", 0)),
    Case(
        ["check", "--provider", "anthropic", "--json"],
        (js("ready", "anthropic", authType="api_key"), 0),
    ),
    Case(
        ["check", "--provider", "openai-codex", "--json", "--credentials"],
        (
            js("ready", "openai-codex", authType="oauth", credentials="codex-acc"),
            0,
        ),
    ),
    Case(["check", "--provider", "groq", "--credentials"], ("from-command", 0)),
    Case(
        ["check", "--provider", "cerebras", "--json"],
        (js("not_ready", "cerebras", reason=NOT_CONFIGURED), 1),
    ),
    Case(["check", "--provider", "cerebras", "--no-refresh"], ("ready", 0)),
    Case(
        ["check", "--provider", "google", "--json"],
        (js("not_ready", "google", reason=NOT_CONFIGURED), 1),
    ),
    Case(
        ["check", "--provider", "nope", "--json"],
        (js("not_ready", "nope", reason="provider_not_found"), 1),
    ),
    Case(
        ["check", "--provider", "mistral", "--json"],
        (js("not_ready", "mistral", reason=NOT_CONFIGURED), 1),
    ),
    Case(
        ["check", "--provider", "other", "--json", "--credentials"],
        (js("ready", "other", authType="api_key", credentials="oth-env"), 0),
    ),
    Case(
        ["check", "--model", "lit/lit-1", "--json"],
        (js("ready", "lit", authType="api_key"), 0),
    ),
    Case(
        ["check", "--provider", "anthropic", "--json"],
        (js("invalid", "anthropic", reason="invalid_state"), 2),
        models=BROKEN,
    ),
    Case(
        ["print-api-key", "--provider", "anthropic"],
        ("sk-ant-literal", 0),
        models=BROKEN,
    ),
    Case(["check"], err("needs a provider", 2)),
    Case(["check", "--provider", "anthropic", "--foo"], err("unknown option")),
    Case(["bogus"], err("unknown command")),
    Case(
        ["logout", "anthropic"],
        (f"{REMOVED} are unchanged.", 0),
    ),
    Case(["logout", "ghost-provider"], err("unknown provider")),
    Case(["logout"], err("usage")),
    Case(["login"], err("usage")),
    Case(["login", "anthropic", "--api-key", "--no-browser"], err("both")),
]
IDS = [" ".join(c.args) + (" (bad models.json)" if c.models == BROKEN else "") for c in CASES]


@dataclass
class Run:
    stdout: str
    stderr: str
    code: int
    auth_after: Any


def run(case: Case, agent: str, base: Path) -> Run:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    root = Path(tempfile.mkdtemp(prefix="auth-", dir=base))
    agent_dir, work = root / "agent", root / "work"
    agent_dir.mkdir()
    work.mkdir()
    try:
        auth = agent_dir / "auth.json"
        auth.write_text(json.dumps(AUTH, indent=2))
        auth.chmod(0o600)
        models = case.models if isinstance(case.models, str) else json.dumps(case.models)
        (agent_dir / "models.json").write_text(models)
        env = {**base_env(root, agent_dir), **ENV, **case.env}
        done = subprocess.run(
            [*argv, "auth", *case.args],
            cwd=work,
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return Run(done.stdout, done.stderr, done.returncode, json.loads(auth.read_text()))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[tuple[int, str], Run]]:
    if _CLI is None:
        pytest.skip(WHY)
    base = Path(tempfile.mkdtemp(prefix="pitrio-auth-"))
    jobs = [(index, agent) for index in range(len(CASES)) for agent in ("pi", "pitrio")]
    try:
        with ThreadPoolExecutor(4) as pool:
            done = pool.map(lambda job: run(CASES[job[0]], job[1], base), jobs)
            yield dict(zip(jobs, done, strict=True))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_pitrio(text: str) -> str:
    """pi's message with its command name read as pitrio's."""
    return text.replace('"pi ', '"pitrio ').replace("Usage: pi ", "Usage: pitrio ")


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_auth_command_as_pi(index: int, outcomes: dict[tuple[int, str], Run]) -> None:
    case = CASES[index]
    pi, pitrio = outcomes[(index, "pi")], outcomes[(index, "pitrio")]
    expected_out, expected_code = case.expect
    assert (pi.stdout.strip(), pi.code) == (expected_out, expected_code), pi.stderr
    assert (pitrio.stdout.strip(), pitrio.code) == (expected_out, expected_code), pitrio.stderr
    assert pitrio.stderr == as_pitrio(pi.stderr)
    assert pitrio.auth_after == pi.auth_after  # logout removed the same entry, or none
