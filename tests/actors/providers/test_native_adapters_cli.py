"""The native mistral-conversations and azure-openai-responses adapters from the outside: a real
``pitrio -p`` process, configured by ``models.json``, against the loopback vendor."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson
import trio

from tests.actors.providers import mistral_mock
from tests.actors.providers.loopback import LoopbackServer, recording, sse


async def _ask(tmp_path: Path, provider: dict[str, object], env: dict[str, str]) -> str:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "models.json").write_text(orjson.dumps({"providers": {"p": provider}}).decode())
    clean = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    clean.update(env, PITRIO_AGENT_DIR=str(agent))
    pitrio = str(Path(sys.executable).parent / "pitrio")
    result = await trio.run_process(
        [pitrio, "--no-session", "--model", "p/m", "-p", "hi"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=clean,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().strip()


async def test_pitrio_answers_through_mistral(tmp_path: Path, server: LoopbackServer) -> None:
    server.push(sse(mistral_mock.text_stream("Bonjour", " !"), chunk_size=5))
    provider = {
        "baseUrl": server.base_url,
        "api": "mistral-conversations",
        "apiKey": "mk",
        "models": [{"id": "m"}],
    }
    assert await _ask(tmp_path, provider, {}) == "Bonjour !"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer mk"
    assert request.json()["model"] == "m"


async def test_pitrio_answers_through_azure(tmp_path: Path, server: LoopbackServer) -> None:
    server.push(sse(recording("openai_responses_text.sse")))
    provider = {
        "baseUrl": server.base_url + "/openai/v1",
        "api": "azure-openai-responses",
        "apiKey": "ak",
        "models": [{"id": "m"}],
    }
    env = {"AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "m=dep"}
    assert await _ask(tmp_path, provider, env) == "Hello, world! Ünïcödé ✓"
    (request,) = server.requests
    assert request.path == "/openai/v1/responses?api-version=v1"
    assert request.headers["api-key"] == "ak"
    assert request.json()["model"] == "dep"
