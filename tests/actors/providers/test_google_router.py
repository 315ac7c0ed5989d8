"""Both Google APIs registered in the router, configured by a models.json (data/) that points
at the loopback vendor: a thinking, tool-calling Gemini turn, and Vertex through ADC."""

from __future__ import annotations

import math
from pathlib import Path

import trio

from pitrio.actors.model_router import (
    ModelRouter,
    ModelRouterHandle,
    RouterConfig,
    start_model_router,
)
from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.messages import ToolCall, user_message
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone
from tests.actors.providers.loopback import loopback_server, sse
from tests.actors.providers.support import TOOLS, make_model
from tests.actors.providers.test_google import THINKING_TOOL_TURN
from tests.actors.providers.test_google_vertex import (
    ANSWER,
    adc_env,
    make_key_pair,
    service_account,
    token_reply,
)

MODELS = Path(__file__).parent / "data" / "google_models.json"
SETTINGS = ProviderSettings(http=HttpSettings(trust_env=False, max_retries=0))


async def stream(router: ModelRouterHandle, model: Model) -> StreamDone:
    context = LlmContext(
        system_prompt="s", messages=(user_message("read a.txt", timestamp=1),), tools=TOOLS
    )
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    async with send:
        await router.stream(model, context, StreamOptions(reasoning="high"), send)
    events = [event async for event in receive]
    done = events[-1]
    assert isinstance(done, StreamDone), done
    return done


async def test_both_google_apis_stream_through_the_router(tmp_path: Path) -> None:
    async with (
        loopback_server() as vendor,
        loopback_server() as tokens,
        trio.open_nursery() as nursery,
    ):
        agent = tmp_path / "agent"
        agent.mkdir()
        (agent / "models.json").write_text(MODELS.read_text().replace("{MOCK}", vendor.base_url))
        account = service_account(tmp_path, make_key_pair()[0], tokens.base_url + "/token")
        env = adc_env(account, GEMINI_MOCK_KEY="AIza-mock-key")
        config = RouterConfig(agent_dir=agent, env=env, settings=SETTINGS)
        router = await start_model_router(nursery, config=config)

        gemini = await router.resolve("gemini-mock/gemini-2.5-flash")
        assert gemini.api == "google-generative-ai"
        vendor.push(sse(THINKING_TOOL_TURN, chunk_size=11))
        done = await stream(router, gemini)
        assert done.reason == "toolUse"
        assert [c.name for c in done.message.content if isinstance(c, ToolCall)] == [
            "read",
            "bash",
        ]
        assert done.message.usage.cost.total > 0
        first = vendor.requests[0]
        assert first.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        assert first.headers["x-goog-api-key"] == "AIza-mock-key"
        thinking = first.json()["generationConfig"]["thinkingConfig"]
        assert thinking == {"includeThoughts": True, "thinkingBudget": 24576}

        vertex = await router.resolve("vertex-mock/gemini-2.5-pro")
        tokens.push(token_reply("ya29.router"))
        vendor.push(sse(ANSWER))
        done = await stream(router, vertex)
        assert (done.reason, done.message.api) == ("stop", "google-vertex")
        second = vendor.requests[1]
        assert second.path == (
            "/us-central1/v1/projects/proj/locations/us-central1/publishers/google/models/"
            "gemini-2.5-pro:streamGenerateContent?alt=sse"
        )
        assert second.headers["authorization"] == "Bearer ya29.router"
        await router.aclose()


def test_vertex_without_a_key_is_available_once_adc_is_configured(tmp_path: Path) -> None:
    home = tmp_path / "home"
    adc = home / ".config" / "gcloud" / "application_default_credentials.json"
    # Provider google-vertex as pi's catalogue names it: not keyless, no key configured.
    vertex = make_model("google-vertex", provider="google-vertex", id="gemini-2.5-pro")

    def availability(env: dict[str, str]) -> str | None:
        config = RouterConfig(agent_dir=tmp_path / "agent", env=env, settings=SETTINGS)
        router = ModelRouter.from_config(config)
        router.registry.register(vertex)
        return router.availability(vertex)

    where = {"HOME": str(home), "GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "l"}
    assert availability(where) == "no API key for provider google-vertex"  # no ADC file
    adc.parent.mkdir(parents=True)
    adc.write_text("{}")
    assert availability(where) is None
    assert availability({"HOME": str(home), "GOOGLE_CLOUD_PROJECT": "p"}) is not None
    named = {"GOOGLE_APPLICATION_CREDENTIALS": str(adc), "GCLOUD_PROJECT": "p",
             "GOOGLE_CLOUD_LOCATION": "l", "HOME": str(tmp_path)}  # fmt: skip
    assert availability(named) is None
