"""The HTTP providers are imported and built on their API's first request (issue 38: cold
start), and the first model listing checks each provider's credentials once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.lazy_http import HTTP_PROVIDERS, LazyHttpProviders
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.registry import offered

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
