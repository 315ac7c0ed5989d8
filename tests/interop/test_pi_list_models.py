"""``--list-models`` against real pi 1.6.0: the same agent directory (a copy for each agent) and
environment give the same model list (issue 34).

pitrio also lists its offline ``faux`` models (a documented pitrio addition); their rows are
left out before comparing. Where they could widen a column (a short list), rows are compared
cell by cell; the whole catalogue is compared byte for byte. ``--list-models --all`` (pitrio's
own flag) is compared against the catalogue as pi prints it: pi lists every model when every
provider has credentials.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pitrio.actors.model_router import catalogue
from tests.interop.pi_install import find_pi
from tests.interop.pi_oneshot import OneShot, cleanup, pi_argv, pitrio_argv, run_print

_NODE, _CLI, WHY = find_pi()
FAR = 4102444800000  # 2100-01-01, in ms: an OAuth entry that never needs a refresh


def every_key() -> dict[str, str]:
    """Credentials for every built-in provider (Cloudflare's account and gateway too)."""
    env = {name: "k" for info in catalogue.providers() for name in info.env_keys}
    env.update({"AWS_PROFILE": "dev", "CLOUDFLARE_ACCOUNT_ID": "a", "CLOUDFLARE_GATEWAY_ID": "g"})
    return env


CODEX_LOGIN = {"openai-codex": {"type": "oauth", "access": "a", "refresh": "r", "expires": FAR,
                                "accountId": "x"}}  # fmt: skip

CUSTOM = {
    "providers": {
        "local": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "k",
            "models": [
                {
                    "id": "thinker",
                    "reasoning": True,
                    "input": ["text", "image"],
                    "contextWindow": 262144,
                    "maxTokens": 65536,
                    "thinkingLevelMap": {"minimal": None, "max": "max"},
                    "inputLimits": {"maxRequestBytes": 1000000},
                    "promptCache": {"short": 300},
                    "samplingParams": {"temperature": 0.6},
                    "compat": {"thinkingFormat": "qwen-chat-template", "newerFlag": 1},
                    "futureField": True,
                },
                {"id": "plain"},
            ],
        },
        "anthropic": {"modelOverrides": {"claude-fable-5": {"contextWindow": 500000}}},
        "future-api": {
            "baseUrl": "http://127.0.0.1:9",
            "api": "some-future-api",
            "apiKey": "k",
            "models": [{"id": "f1"}],
        },
    }
}


@dataclass(frozen=True)
class Case:
    """One agent directory, environment and command line, run by both agents."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()


CASES = [
    Case("every provider", every_key(), {"auth.json": CODEX_LOGIN}),
    Case("a few keys", {"OPENAI_API_KEY": "k", "RADIUS_API_KEY": "k", "AZURE_OPENAI_API_KEY": "k"}),
    # Cloudflare needs its account (and the gateway's) id besides the key.
    Case("cloudflare without its ids", {"CLOUDFLARE_API_KEY": "k", "GROQ_API_KEY": "k"}),
    Case(
        "cloudflare workers with the account id",
        {"CLOUDFLARE_API_KEY": "k", "CLOUDFLARE_ACCOUNT_ID": "a"},
    ),
    Case("models.json of pi 1.6.0", {"ANTHROPIC_API_KEY": "k"}, {"models.json": CUSTOM}),
    Case(
        "a models.json breaking pi's schema is refused whole",
        {"GROQ_API_KEY": "k"},
        {"models.json": {"providers": {"local": {**CUSTOM["providers"]["local"], "apiKey": 5}}}},
    ),
    Case("search", {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, args=("opus",)),
]
EVERY = "every provider"


def run(case: Case, agent: str, base: Path, extra: tuple[str, ...] = ()) -> OneShot:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    args = ["--list-models", *case.args, *extra]
    shot = run_print(agent, argv, case.files, args=args, env=case.env, base=base)
    cleanup(shot)
    return shot


@pytest.fixture(scope="module")
def shots() -> Iterator[dict[tuple[str, str], OneShot]]:
    if _CLI is None:
        pytest.skip(WHY)
    base = Path(tempfile.mkdtemp(prefix="pitrio-list-models-"))
    jobs = [(case, agent, ()) for case in CASES for agent in ("pi", "pitrio")]
    [every] = [case for case in CASES if case.name == EVERY]
    jobs.append((every, "pitrio", ("--all",)))
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda job: run(job[0], job[1], base, job[2]), jobs))
    yield {
        (case.name, agent + "".join(extra)): shot
        for (case, agent, extra), shot in zip(jobs, done, strict=True)
    }


def rows(text: str) -> list[list[str]]:
    """The table's cells, pitrio's faux rows left out."""
    return [line.split() for line in text.splitlines() if not line.startswith("faux ")]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_model_list_as_pi(case: Case, shots: dict[tuple[str, str], OneShot]) -> None:
    pi, mine = shots[(case.name, "pi")], shots[(case.name, "pitrio")]
    assert (pi.exit_code, mine.exit_code) == (0, 0), (pi.stderr[-400:], mine.stderr[-400:])
    assert len(rows(pi.stdout)) > 1, pi.stdout  # a header and at least one model
    assert rows(mine.stdout) == rows(pi.stdout)


def test_the_whole_catalogue_byte_for_byte(shots: dict[tuple[str, str], OneShot]) -> None:
    pi, mine = shots[(EVERY, "pi")], shots[(EVERY, "pitrio")]
    # pi 1.6.0 lists every chat model of pi-ai 1.6.0 when every provider has credentials.
    assert len(pi.stdout.splitlines()) == 1 + len(catalogue.models()) == 1 + 1698
    theirs = pi.stdout.splitlines()
    ours = [line for line in mine.stdout.splitlines() if not line.startswith("faux ")]
    assert ours == theirs


def test_list_models_all_is_the_catalogue_as_pi_lists_it(
    shots: dict[tuple[str, str], OneShot],
) -> None:
    pi, every = shots[(EVERY, "pi")], shots[(EVERY, "pitrio--all")]
    assert every.exit_code == 0, every.stderr[-400:]
    table = rows(every.stdout)
    assert table[0][-1] == "usable"
    assert [row[:-1] for row in table] == rows(pi.stdout)
    # Every model has credentials; only radius's, whose API (pi-messages, pi's own wire
    # format) pitrio has no adapter for, are not usable.
    unusable = {row[0] for row in table[1:] if row[-1] == "no"}
    assert unusable == {"radius"}
    assert {m.api for m in catalogue.models() if m.provider == "radius"} == {"pi-messages"}


def test_models_json_of_pi_1_6_loads_whole(shots: dict[tuple[str, str], OneShot]) -> None:
    case = "models.json of pi 1.6.0"
    for agent in ("pi", "pitrio"):
        shot = shots[(case, agent)]
        listed = {(row[0], row[1]): row for row in rows(shot.stdout)[1:]}
        # max in the map, new fields and unknown keys: the model is there, as pi lists it.
        assert listed[("local", "thinker")][2:] == ["262.1K", "65.5K", "yes", "yes"], agent
        assert ("local", "plain") in listed and ("future-api", "f1") in listed, agent
        assert listed[("anthropic", "claude-fable-5")][2] == "500K", agent
        assert "models.json" not in shot.stderr, (agent, shot.stderr)


def test_a_refused_models_json_is_named_on_stderr(shots: dict[tuple[str, str], OneShot]) -> None:
    case = "a models.json breaking pi's schema is refused whole"
    for agent in ("pi", "pitrio"):
        shot = shots[(case, agent)]
        assert "providers.local.apiKey" in shot.stderr, (agent, shot.stderr)
        assert not [row for row in rows(shot.stdout) if row[0] == "local"], agent
    mine = shots[(case, "pitrio")].stderr
    assert "models.json: providers.local.apiKey: expected a string, got the number 5" in mine


def rpc_available_models(argv: list[str], env: dict[str, str], root: Path) -> list[Any]:
    """``get_available_models`` over RPC: the models, as the agent sends them."""
    from tests.interop.pi_oneshot import base_env

    agent_dir, work = root / "agent", root / "work"
    agent_dir.mkdir(parents=True)
    work.mkdir()
    full_env = {**base_env(root, agent_dir), **env}
    request = json.dumps({"id": "1", "type": "get_available_models"}) + "\n"
    with subprocess.Popen(
        [*argv, "--mode", "rpc", "--no-session"],
        cwd=work,
        env=full_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(request)
        process.stdin.flush()
        try:
            for line in process.stdout:
                answer = json.loads(line)
                if answer.get("id") == "1":
                    return list(answer["data"]["models"])
        finally:
            process.kill()
    raise AssertionError("no answer to get_available_models")


def test_get_available_models_sends_the_catalogue_as_pi(tmp_path: Path) -> None:
    # Key for key and in pi's order: radius's pi-messages models included (offered, as pi
    # offers them; using one is the error naming the API), type "chat", tiers, inputLimits.
    if _CLI is None:
        pytest.skip(WHY)
    env = {"ANTHROPIC_API_KEY": "k", "RADIUS_API_KEY": "k", "OPENROUTER_API_KEY": "k"}
    pi_cmd, mine_cmd = pi_argv(), pitrio_argv()
    assert pi_cmd is not None
    with ThreadPoolExecutor(2) as pool:
        theirs, ours = pool.map(
            lambda job: rpc_available_models(job[0], env, tmp_path / job[1]),
            [(pi_cmd, "pi"), (mine_cmd, "pitrio")],
        )
    assert len(theirs) > 400 and any(m["api"] == "pi-messages" for m in theirs)
    assert [json.dumps(m) for m in ours] == [json.dumps(m) for m in theirs]
