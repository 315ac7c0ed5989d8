"""The HTTP providers are imported and built on their API's first request (issue 38: cold
start), and the first model listing checks each provider's credentials once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from pitrio.actors.model_router import catalogue
from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.lazy_http import HTTP_PROVIDERS, LazyHttpProviders
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.registry import FAUX_MODELS, ModelRegistry, offered
from pitrio.errors import UnknownModelError

START = """
import sys
from pathlib import Path
from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
router = ModelRouter.from_config(RouterConfig(agent_dir=Path(sys.argv[1]), env={}))
listed = router.available()
loaded = sorted(m for m in sys.modules if m == "httpx" or ".providers." in m)
print(len(listed), " ".join(loaded))
"""


def test_a_router_starts_and_lists_without_the_http_providers(tmp_path: Path) -> None:
    # A fresh interpreter: this test process has imported the providers long ago.
    done = subprocess.run(
        [sys.executable, "-c", START, str(tmp_path)], capture_output=True, text=True, check=True
    )
    count, *loaded = done.stdout.split()
    assert int(count) > 0
    assert "httpx" not in loaded
    assert not [m for m in loaded if m.rsplit(".", 1)[-1] in {p for _, p, _ in HTTP_PROVIDERS}]


def test_each_api_is_served_and_its_provider_built_once_on_first_use() -> None:
    lazy = LazyHttpProviders(Credentials(auth_path=None, env={}), ProviderSettings())
    assert set(lazy.stream_fns()) == {api for api, _, _ in HTTP_PROVIDERS}
    assert lazy.pool is None
    first = lazy.provider("anthropic-messages")
    assert type(first).__name__ == "AnthropicProvider" and lazy.pool is not None
    assert lazy.provider("anthropic-messages") is first
    other = lazy.provider("openai-completions")
    assert type(other).__name__ == "OpenAICompletionsProvider"


def test_the_listing_asks_the_credentials_once_per_provider(tmp_path: Path) -> None:
    router = ModelRouter.from_config(RouterConfig(agent_dir=tmp_path, env={"HOME": "/nowhere"}))
    asked: list[str] = []
    real = router.credentials.configured

    def counting(provider: str) -> bool:
        asked.append(provider)
        return real(provider)

    router.credentials.configured = counting  # type: ignore[method-assign]
    listed = router.available()
    assert len(asked) == len(set(asked)) > 1
    router.credentials.configured = real  # type: ignore[method-assign]
    assert listed == offered(m for m in router.registry.list() if router.listed(m))


# -- the catalogue's models are built on first need --------------------------------------------

BUILT = """
import sys
from pathlib import Path
from pitrio.actors.model_router import catalogue
from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
home = sys.argv[1]
router = ModelRouter.from_config(RouterConfig(agent_dir=Path(home), env=dict(HOME=home)))
listed = router.available()
first = catalogue.provider_models.cache_info().currsize
model = router.registry.resolve("anthropic/claude-sonnet-4-5")
print(len(listed), first, catalogue.provider_models.cache_info().currsize, model.provider)
"""


def test_a_start_builds_the_models_of_its_model_s_provider_only(tmp_path: Path) -> None:
    # Fresh interpreter: the catalogue's caches of this process are filled by other tests.
    done = subprocess.run(
        [sys.executable, "-c", BUILT, str(tmp_path)], capture_output=True, text=True, check=True
    )
    listed, before, after, provider = done.stdout.split()
    assert int(listed) == len(FAUX_MODELS)  # no credentials: the faux models only
    assert (int(before), int(after), provider) == (0, 1, "anthropic")


MOCK = {
    "providers": {
        "mock": {
            "baseUrl": "http://localhost:1/v1",
            "api": "openai-completions",
            "apiKey": "k",
            "models": [{"id": "mock-model"}, {"id": "gpt-4o"}],  # gpt-4o: openai's id too
        },
        "routed": {"models": [{"id": "auto", "api": "pi-virtual", "fallback": ["openai/gpt-4o"]}]},
    }
}


def _routers(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> tuple[ModelRouter, ModelRouter]:
    """A router whose catalogue waits for its first need, and one that registered it all at
    start (as before issue 38: every model in order, then the user's)."""
    lazy = ModelRouter.from_config(RouterConfig(agent_dir=tmp_path, env=env))
    with monkeypatch.context() as patch:

        def at_once(self: ModelRegistry, names: Any, build: Any, ids: Any = None) -> None:
            self.register_all(model for name in names for model in build(name))

        patch.setattr(ModelRegistry, "register_later", at_once)
        eager = ModelRouter.from_config(RouterConfig(agent_dir=tmp_path, env=env))
    assert eager.registry._build_later is None
    return lazy, eager


def _answer(question: Callable[[ModelRouter], object], router: ModelRouter) -> object:
    """What ``question`` returns, or the error it raises (as its type and message)."""
    try:
        return question(router)
    except UnknownModelError as error:
        return type(error), str(error)


@pytest.mark.parametrize("models_json", [None, MOCK], ids=["catalogue", "with-own-providers"])
def test_a_catalogue_built_on_need_answers_as_one_built_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models_json: dict[str, Any] | None
) -> None:
    if models_json is not None:
        (tmp_path / "models.json").write_bytes(orjson.dumps(models_json))
    env = {"HOME": str(tmp_path), "OPENAI_API_KEY": "k", "GROQ_API_KEY": "k"}
    questions: list[Callable[[ModelRouter], object]] = [
        lambda r: r.available(),
        lambda r: r.problems(),
        lambda r: r.registry.resolve("openai/gpt-4o"),
        lambda r: r.registry.resolve("openrouter/anthropic/claude-sonnet-4.5"),
        lambda r: r.registry.resolve("gpt-4o", r._usable),  # a bare id (several providers)
        lambda r: r.registry.resolve_pattern("openai/gpt-4o:high"),
        lambda r: r.registry.resolve("azure-openai-responses/gpt-4o"),  # a renamed provider
        lambda r: r.registry.find("groq", "nope"),
        lambda r: r.registry.resolve("mock/mock-model"),  # no provider has it (or the provider)
        lambda r: r.registry.resolve("claude-sonnet-4-5"),  # a bare id the catalogue has
        lambda r: r.registry.find("openai", "gpt-4o"),
        lambda r: r.registry.list(),
    ]
    if models_json is not None:
        questions += [
            lambda r: r.registry.resolve("mock-model"),
            lambda r: r.candidate("routed/auto"),
            lambda r: r.registry.resolve("gpt-4o"),
        ]
    for question in questions:
        lazy, eager = _routers(tmp_path, env, monkeypatch)
        assert lazy.registry._build_later is not None
        assert _answer(question, lazy) == _answer(question, eager)
        assert lazy.registry.list() == eager.registry.list()
        assert lazy.registry._by_id == eager.registry._by_id
    lazy, eager = _routers(tmp_path, env, monkeypatch)
    with pytest.raises(UnknownModelError, match="Unknown model: openai/nope"):
        lazy.registry.resolve("openai/nope")
    assert lazy.registry.list() == eager.registry.list()


def test_an_id_no_provider_has_builds_none_of_the_catalogue(tmp_path: Path) -> None:
    # A resumed session whose model is not configured here ("Could not restore model"): the
    # lookup reads the catalogue's ids rather than building its models; an id one of its
    # providers has, and a renamed provider's model, still build them and are found.
    config = RouterConfig(agent_dir=tmp_path, env={"HOME": str(tmp_path)})
    router = ModelRouter.from_config(config)
    for missing in ("mock/mock-model", "nope", "openai/nope"):
        with pytest.raises(UnknownModelError, match=f"Unknown model: {missing}"):
            router.registry.resolve(missing)
        assert router.registry._build_later is not None  # nothing but openai's built
    assert router.registry.resolve("claude-sonnet-4-5-20250929").provider == "anthropic"
    assert router.registry._build_later is None  # a bare id: every provider built
    router = ModelRouter.from_config(config)
    assert router.registry.resolve("azure-openai-responses/gpt-4o").provider == "azure"
    assert router.registry._build_later is None


def test_a_model_registered_while_the_catalogue_waits_keeps_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models.json").write_bytes(orjson.dumps(MOCK))
    lazy, eager = _routers(tmp_path, {"HOME": str(tmp_path)}, monkeypatch)
    old = eager.registry.resolve("openai/gpt-4o")
    mine = attrs.evolve(eager.registry.resolve("mock/gpt-4o"), name="Mine")
    for changed in (attrs.evolve(old, name="Mine"), mine, attrs.evolve(mine, id="new")):
        for router in (lazy, eager):
            router.registry.register(changed)
        assert lazy.registry.list() == eager.registry.list()
        assert lazy.registry._by_id == eager.registry._by_id
    assert lazy.registry.unregister_provider("groq") == eager.registry.unregister_provider("groq")
    assert lazy.registry.list() == eager.registry.list()
    lazy, eager = _routers(tmp_path, {"HOME": str(tmp_path)}, monkeypatch)
    for router in (lazy, eager):
        router.registry.register(mine)  # replaced while the catalogue waits
        router.registry.register(attrs.evolve(mine, id="new"))  # added after it
    assert lazy.registry._build_later is not None
    assert lazy.registry.list() == eager.registry.list()
    assert lazy.registry._by_id == eager.registry._by_id


def test_the_catalogue_read_by_line_is_the_catalogue_parsed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = orjson.loads(catalogue.CATALOGUE_PATH.read_bytes())
    top, heads, chunks = catalogue._layout()
    assert top == {k: v for k, v in document.items() if k != "providers"}
    assert heads == tuple(
        {k: v for k, v in p.items() if k != "models"} for p in document["providers"]
    )
    assert {name: orjson.loads(chunk) for name, chunk in chunks.items()} == {
        p["name"]: p["models"] for p in document["providers"]
    }
    # A file in another layout (one line) is parsed whole, to the same answer.
    other = tmp_path / "catalogue.json"
    other.write_bytes(orjson.dumps(document))
    monkeypatch.setattr(catalogue, "CATALOGUE_PATH", other)
    top2, heads2, chunks2 = catalogue._layout.__wrapped__()
    assert (top2, heads2) == (top, heads)
    assert {n: orjson.loads(c) for n, c in chunks2.items()} == {
        n: orjson.loads(c) for n, c in chunks.items()
    }
    with pytest.raises(ValueError):
        catalogue._split(orjson.dumps(document).split(b"\n"), orjson.loads)


FIRST_REQUEST = """
import sys
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.lazy_http import LazyHttpProviders
from pitrio.actors.model_router.providers.base import ProviderSettings
lazy = LazyHttpProviders(Credentials(auth_path=None, env={}), ProviderSettings())
lazy.provider("openai-completions")
import httpx  # what the request itself imports (the transport's errors are httpx's)
print(" ".join(sorted(m for m in ("click", "pygments", "rich") if m in sys.modules)) or "-")
print(sys.modules.get("httpx._main", 0) is None)
"""


def test_the_providers_load_httpx_without_its_command_line_client() -> None:
    """What a first request imports (issue 38: ~14 ms of the first reply where click and
    pygments are installed, as in a developer's environment)."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_REQUEST], capture_output=True, text=True, check=True
    )
    cli_modules, stubbed = done.stdout.split("\n")[:2]
    assert cli_modules == "-"
    assert stubbed == "True"


DIRECT_REQUEST = """
import socket, sys, threading
import trio
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.lazy_http import LazyHttpProviders
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.messages import UserMessage
from pitrio.messages.model import LlmContext, StreamOptions
from tests.actors.providers.support import make_model

chunk = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\\n\\n'
body = chunk * 3 + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\\n\\n'
body += b"data: [DONE]\\n\\n"
listener = socket.create_server(("127.0.0.1", 0))

def serve():
    conn, _ = listener.accept()
    with conn:
        data = b""
        while b"\\r\\n\\r\\n" not in data:
            data += conn.recv(65536)
        head = b"HTTP/1.1 200 OK\\r\\ncontent-type: text/event-stream\\r\\n"
        conn.sendall(head + b"content-length: %d\\r\\n\\r\\n" % len(body) + body)

threading.Thread(target=serve, daemon=True).start()
url = "http://127.0.0.1:%d/v1" % listener.getsockname()[1]
lazy = LazyHttpProviders(Credentials(auth_path=None, env={}), ProviderSettings())
events = []

async def main():
    send, receive = trio.open_memory_channel(100)
    context = LlmContext(system_prompt="", messages=(UserMessage(content="x", timestamp=1),))
    async with send:
        await lazy.stream_fns()["openai-completions"](
            make_model("openai-completions", url), context, StreamOptions(api_key="k"), send
        )
    events.extend(receive.receive_nowait() for _ in range(receive.statistics().current_buffer_used))

trio.run(main)
print(events[-1].type, "".join(getattr(e, "delta", "") for e in events))
print("httpx" in sys.modules)
"""


def test_a_direct_request_that_succeeds_never_imports_httpx() -> None:
    """The direct transport raises httpx's exceptions, and the client is httpx, but a request
    that streams its answer needs neither (issue 38: ``import httpx`` was ~20 ms of every
    process's first answer)."""
    done = subprocess.run(
        [sys.executable, "-c", DIRECT_REQUEST],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    answer, imported = done.stdout.split("\n")[:2]
    assert answer == "done hihihi"
    assert imported == "False"
