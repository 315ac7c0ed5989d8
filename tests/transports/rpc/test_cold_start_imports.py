"""What a ``pitrio --mode rpc`` start leaves unimported until it is used (issue 38: cold
start): the first ``get_state`` is answered without jsonschema (the schemas of the tools
every session registers are trusted, checked by the tests; a ``models.json`` or
``settings.json`` that passed pi's schema before is not checked again), the HTTP stack or the
providers, and without building the catalogue's models, importing ``decimal`` (the tools'
JavaScript number rendering) or compiling the supervisor's error-text patterns (retry and
overflow: only a failed response needs them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

START = """
import json, sys
sys.argv = ["pitrio", "--mode", "rpc"]
from pitrio.transports.cli import main
main()
from pitrio.actors.model_router import catalogue
from pitrio.actors.supervisor import overflow, retry
built = catalogue.provider_models.cache_info().currsize
compiled = retry.patterns.cache_info().currsize + overflow.patterns.cache_info().currsize
print(json.dumps([built, compiled, sorted(sys.modules)]), file=sys.stderr)
"""

MODELS = {
    "providers": {
        "mock": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "mock-key",
            "models": [{"id": "mock-model", "contextWindow": 128000}],
        }
    }
}
SETTINGS = {"defaultProvider": "mock", "defaultModel": "mock-model"}

DEFERRED = ("jsonschema", "referencing", "httpx", "h11", "websockets", "html", "decimal", "glob")
EXTENSION_HOST = tuple(
    f"pitrio.actors.session.extensions.{name}"
    for name in (
        *("host", "boundary", "drafts", "context"),
        *("host_commands", "host_handle", "events", "runner"),
    )
)
"""The extension host's modules, its events and runner: a session without extensions has
no host, and builds no event for one."""
FIRST_USE = (
    "pitrio.actors.tool_executor.tools.edit_core",
    "pitrio.actors.model_router.oauth",
    "pitrio.actors.session.resources.packages",
    "pitrio.actors.mcp.ranking",
    *(f"pitrio.actors.tool_executor.codemode.{name}" for name in ("script", "sandbox", "output")),
    "pitrio.actors.tool_executor.codemode.source",
    "pitrio.messages.quick",  # the stored messages' quick decoder: the first decoded message
    # the tool batch (preflight, argument validation, the per-file queues): the first tool call
    *(f"pitrio.actors.tool_executor.{name}" for name in ("batch", "validation", "mutation")),
    "pitrio.actors.tool_executor.validation_explain",
    # grep's and find's walker, globs and native searches (rg, fd): the first search
    *(f"pitrio.actors.tool_executor.tools.{name}" for name in ("walk", "globs", "native")),
    "pitrio.actors.model_router.providers.retry",  # an HTTP provider's repeats: its request
    "pitrio.sdk.store",  # the RPC tree's node type is only named: listing, repair, export
    "pitrio.actors.session.export_file",
    "pitrio.actors.session.user_bash",  # the user's shell commands: the first ``bash`` command
    "pitrio.actors.supervisor.actor.commands",  # the first retry, compaction or branch summary
    "pitrio.actors.model_router.virtual",  # routing: the first virtual model (an extension's)
    "pitrio.actors.session_store.catalog",  # --session, --continue, --fork, listing: a new one
    # another writer's entries in the session file: judged and merged when one appears
    *(f"pitrio.actors.session_store.{name}" for name in ("foreign", "reconcile")),
    "pitrio.actors.model_router.providers.faux_rules",  # the fixtures' faux rules: a testing aid
    "pitrio.actors.session.extensions.ui",  # the UI protocol: the first dialog answer
)
"""Imported by their first use: the edit tool's text work by the first edit, the OAuth flows
by the first token refresh (or a logged-in Copilot's base URL), the package sources by the
first ``packages`` entry of a settings file, the MCP ranking by the first tool search, the
codemode sandbox and what runs a script by the first ``codemode`` call, the tool batch by the
first tool call, grep's and find's helpers by the first search, a provider's retry rules by
the first HTTP request, the SDK's store functions (listing, repair, export) by their first
use, the user's shell command runner by the first ``bash`` command, the supervisor's commands
by the first it is sent (a plain turn sends none), and the rest by the use their comments
name."""


def _start(agent: Path, work: Path) -> tuple[dict[str, object], int, int, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have their bytecode (and verdicts)
    env["PITRIO_AGENT_DIR"] = str(agent)
    done = subprocess.run(
        [sys.executable, "-c", START],
        input='{"type":"get_state","id":"1"}\n',
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=60,
        check=True,
    )
    answer = json.loads(done.stdout.splitlines()[0])
    built, compiled, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    return answer, built, compiled, set(loaded)


@pytest.mark.parametrize("config", [False, True], ids=["bare", "models-and-settings"])
def test_the_first_get_state_imports_none_of_the_deferred_modules(
    tmp_path: Path, config: bool
) -> None:
    agent, work = tmp_path / "agent", tmp_path / "work"
    agent.mkdir()
    work.mkdir()
    if config:  # the benchmarks' setup: a provider of their own, made the default
        (agent / "models.json").write_text(json.dumps(MODELS))
        (agent / "settings.json").write_text(json.dumps(SETTINGS))
        _start(agent, work)  # the first start checks both files against pi's schemas
    answer, built, compiled, loaded = _start(agent, work)
    assert answer["command"] == "get_state" and answer["success"] is True
    assert answer["data"]["model"]["id"] == ("mock-model" if config else "echo")
    assert "pitrio.actors.session.runtime" in loaded  # the session did start
    assert not [m for m in loaded if m.split(".")[0] in DEFERRED]
    assert not [m for m in loaded if ".model_router.providers." in m and m.endswith("_stream")]
    assert built == 0  # no catalogue model was needed
    assert compiled == 0  # no error text was classified
    assert not loaded.intersection(EXTENSION_HOST)
    assert not loaded.intersection(FIRST_USE)
