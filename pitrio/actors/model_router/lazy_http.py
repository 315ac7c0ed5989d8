"""The HTTP providers, imported and built on their first request (start-up time, issue 38).

The router registers a stream function for every API at start, but a session that never
talks to a remote model (the faux models, a first ``get_state``) needs none of the provider
modules, httpx or its connection pool: importing them cost about a third of a cold start.
:class:`LazyHttpProviders` hands the registry one small stream function per API that, on the
first request for that API, imports the provider's module, builds the provider (sharing one
:class:`~pitrio.actors.model_router.providers.http.HttpPool`, itself built then) and from then
on forwards to it.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from pitrio import _attrs_cache
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers.base import EventSender, ProviderSettings, StreamFn
from pitrio.messages.model import LlmContext, Model, StreamOptions

if TYPE_CHECKING:
    from pitrio.actors.model_router.providers.http import HttpPool

HTTP_PROVIDERS: tuple[tuple[str, str, str], ...] = (
    ("openai-completions", "openai_completions", "OpenAICompletionsProvider"),
    ("openai-responses", "openai_responses", "OpenAIResponsesProvider"),
    ("anthropic-messages", "anthropic", "AnthropicProvider"),
    ("bedrock-converse-stream", "bedrock_converse_stream", "BedrockProvider"),
    ("mistral-conversations", "mistral", "MistralProvider"),
    ("azure-openai-responses", "azure_openai_responses", "AzureOpenAIResponsesProvider"),
    ("openai-codex-responses", "openai_codex_responses", "OpenAICodexResponsesProvider"),
    ("google-generative-ai", "google", "GoogleProvider"),
    ("google-vertex", "google_vertex", "GoogleVertexProvider"),
)
"""Each API with the module (under ``providers``) and class of its provider."""

_PACKAGE = "pitrio.actors.model_router.providers"


def _without_httpx_cli() -> None:
    """Keep httpx's command-line client out of the process (before httpx is imported).

    httpx's package imports that client whenever click and pygments are installed (a
    developer's environment has them: uvicorn's and pytest's): ~14 ms of CPU at a process's
    first request, inside its first reply (issue 38). pitrio never runs it; a ``None`` entry
    makes the import fail, and httpx then defines the stub ``main`` it has for that case."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


class LazyHttpProviders:
    """Stream functions for the HTTP APIs whose providers are built on first use."""

    def __init__(self, credentials: Credentials, settings: ProviderSettings) -> None:
        self._credentials = credentials
        self._settings = settings
        self._providers: dict[str, Any] = {}
        self.pool: HttpPool | None = None
        """The shared connection pool, once a provider needed it."""

    def stream_fns(self) -> dict[str, StreamFn]:
        """One stream function per API of :data:`HTTP_PROVIDERS`."""
        return {api: self._stream_fn(api) for api, _, _ in HTTP_PROVIDERS}

    def provider(self, api: str) -> Any:
        """The provider of ``api``, imported and built now if it was not yet."""
        provider = self._providers.get(api)
        if provider is None:
            module_name, class_name = next(
                (module, cls) for name, module, cls in HTTP_PROVIDERS if name == api
            )
            # The modules' attrs classes come from the method cache (their compiling was
            # ~5 ms of the first request, issue 38).
            with _attrs_cache.caching():
                if self.pool is None:
                    _without_httpx_cli()
                    from pitrio.actors.model_router.providers.http import HttpPool

                    self.pool = HttpPool(self._settings.http)
                module = importlib.import_module(f"{_PACKAGE}.{module_name}")
            cls = getattr(module, class_name)
            provider = cls(self.pool, self._credentials, self._settings)
            self._providers[api] = provider
        return provider

    def _stream_fn(self, api: str) -> StreamFn:
        async def stream(
            model: Model, context: LlmContext, options: StreamOptions, send: EventSender
        ) -> None:
            await self.provider(api).stream(model, context, options, send)

        return stream

    async def aclose(self) -> None:
        """Close the connection pool, if one was built."""
        if self.pool is not None:
            await self.pool.aclose()
