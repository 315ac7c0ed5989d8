"""The ``azure-openai-responses`` provider: OpenAI's Responses API served by Azure OpenAI.

The wire is the Responses API's, so the request body and the stream parser are
:mod:`.openai_responses`'s; Azure differs in where the request goes and how it is authorised
(facts from pi-ai's ``azure-openai-responses.js`` and the OpenAI SDK's Azure client):

- URL: ``{base}/responses?api-version={version}``. The base is ``$AZURE_OPENAI_BASE_URL``,
  else ``https://{$AZURE_OPENAI_RESOURCE_NAME}.openai.azure.com/openai/v1``, else the model's
  ``baseUrl``; an Azure host (``*.openai.azure.com``, ``*.cognitiveservices.azure.com``) whose
  path is empty or ``/openai`` gets ``/openai/v1``. The version is
  ``$AZURE_OPENAI_API_VERSION``, else ``v1``.
- ``model`` in the body is the deployment name: ``$AZURE_OPENAI_DEPLOYMENT_NAME_MAP``
  (``model=deployment,...``) maps model ids to deployments; unmapped ids are used as is.
- The key goes in an ``api-key`` header. Without a key, a Microsoft Entra ID access token in
  ``$AZURE_OPENAI_AD_TOKEN`` goes as ``Authorization: Bearer`` (a pitrio addition; pi knows
  keys only).
- The body has ``store: false`` (since pi 1.6.0) and no ``prompt_cache_retention``;
  ``prompt_cache_key`` is the session id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from pitrio.actors.model_router.providers import openai_responses
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    bearer_json_request,
    join_url,
)
from pitrio.actors.model_router.providers.openai_responses_stream import OpenAIResponsesParser
from pitrio.errors import CredentialError
from pitrio.messages.model import LlmContext, Model, StreamOptions

API = "azure-openai-responses"
DEFAULT_API_VERSION = "v1"
KEY_ENV = "AZURE_OPENAI_API_KEY"
TOKEN_ENV = "AZURE_OPENAI_AD_TOKEN"
BASE_URL_ENV = "AZURE_OPENAI_BASE_URL"
RESOURCE_ENV = "AZURE_OPENAI_RESOURCE_NAME"
VERSION_ENV = "AZURE_OPENAI_API_VERSION"
DEPLOYMENTS_ENV = "AZURE_OPENAI_DEPLOYMENT_NAME_MAP"
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com")

NO_BASE_URL = (
    "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or "
    "AZURE_OPENAI_RESOURCE_NAME, or pass azureBaseUrl, azureResourceName, or model.baseUrl."
)
NO_KEY = (
    "Azure OpenAI API key is required. Set AZURE_OPENAI_API_KEY environment variable or "
    "pass it as an argument."
)


def deployment_name(model: Model, env: Mapping[str, str]) -> str:
    """The deployment serving ``model``: its entry in the deployment map, else its id."""
    for entry in (env.get(DEPLOYMENTS_ENV) or "").split(","):
        model_id, sep, deployment = entry.strip().partition("=")
        # pi splits on the first "=" only, keeping one piece after it.
        deployment = deployment.split("=", 1)[0]
        if sep and model_id.strip() == model.id and deployment.strip():
            return deployment.strip()
    return model.id


def normalize_base_url(base_url: str) -> str:
    """``base_url`` without trailing slashes; an Azure host's bare path becomes ``/openai/v1``.

    Raises :class:`CredentialError` (a configuration error) when it is not a URL.
    """
    trimmed = base_url.strip().rstrip("/")
    parts = urlsplit(trimmed)
    if not parts.scheme or not parts.netloc:
        raise CredentialError(f"Invalid Azure OpenAI base URL: {base_url}")
    host = (parts.hostname or "").lower()
    path = parts.path.rstrip("/")
    if host.endswith(_AZURE_HOSTS) and path in ("", "/openai"):
        return urlunsplit((parts.scheme, parts.netloc, "/openai/v1", "", ""))
    return trimmed


def base_url(model: Model, env: Mapping[str, str]) -> str:
    """Where the deployment is served (see the module docstring for the order)."""
    configured = (env.get(BASE_URL_ENV) or "").strip()
    if not configured and env.get(RESOURCE_ENV):
        configured = f"https://{env[RESOURCE_ENV]}.openai.azure.com/openai/v1"
    if not configured:
        configured = model.base_url
    if not configured:
        raise CredentialError(NO_BASE_URL)
    return normalize_base_url(configured)


def build_body(
    model: Model, context: LlmContext, options: StreamOptions, *, deployment: str
) -> dict[str, Any]:
    """The Responses body of :mod:`.openai_responses` as pi sends it to Azure (pure)."""
    # Azure takes strict tools unless the model's compat says otherwise.
    shared = dict(openai_responses.build_body(model, context, options, strict_default=True))
    shared.pop("prompt_cache_retention", None)
    shared["model"] = deployment
    if options.session_id:
        shared["prompt_cache_key"] = options.session_id  # whatever the cache retention
    # pi's Azure key order; fields it does not name keep their place after these.
    body = {key: shared.pop(key) for key in _KEY_ORDER if key in shared}
    body.update(shared)
    return body


_KEY_ORDER = (
    "model",
    "input",
    "stream",
    "prompt_cache_key",
    "store",
    "max_output_tokens",
    "temperature",
    "tools",
    "reasoning",
    "include",
)


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
    env: Mapping[str, str] | None = None,
) -> HttpRequest:
    """The HTTP request of one streamed response (pure: ``env`` holds the Azure settings).

    ``api_key`` goes as ``api-key``; without one, ``$AZURE_OPENAI_AD_TOKEN`` as a bearer token.
    Raises :class:`CredentialError` when neither is there or no base URL can be had.
    """
    env = env or {}
    token = None if api_key else env.get(TOKEN_ENV)
    if not api_key and not token:
        raise CredentialError(NO_KEY)
    version = env.get(VERSION_ENV) or DEFAULT_API_VERSION
    url = join_url(base_url(model, env), "responses") + "?api-version=" + quote(version, safe="")
    body = build_body(model, context, options, deployment=deployment_name(model, env))
    request = bearer_json_request(url, body, api_key=token, headers={})
    auth = {"api-key": api_key} if api_key else {}
    # The configured headers come last, so they may override (as the SDK's default headers).
    merged = {**request.headers, **auth, **{k.lower(): v for k, v in headers.items()}}
    return HttpRequest(url=request.url, headers=merged, body=request.body)


class AzureOpenAIResponsesProvider(HttpProvider):
    """The ``azure-openai-responses`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    accept = "application/json"  # what pi's OpenAI client asks for, streaming or not

    async def prepare(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> HttpRequest:
        """The provider's key, else ``$AZURE_OPENAI_API_KEY``, else an Entra token (pi's
        order, the token ours); raises :class:`CredentialError` naming what is missing."""
        env = self.credentials.env_for(model.provider)
        try:
            api_key = await self.credentials.api_key(model.provider, options.api_key)
        except CredentialError:
            api_key = None  # pi falls back to the Azure variable, then fails with its text
        api_key = api_key or env.get(KEY_ENV) or None
        headers = await self.credentials.resolve_headers(
            model.headers, f"models.json providers.{model.provider}", model.provider
        )
        return build_request(model, context, options, api_key=api_key, headers=headers, env=env)

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """See :func:`build_request` (with the credentials' environment)."""
        return build_request(
            model, context, options, api_key=api_key, headers=headers, env=self.credentials.env
        )

    def new_parser(self, model: Model) -> OpenAIResponsesParser:
        """The Responses API parser, for one response of ``model``."""
        return OpenAIResponsesParser(model)


__all__ = [
    "API",
    "AzureOpenAIResponsesProvider",
    "base_url",
    "build_body",
    "build_request",
    "deployment_name",
    "normalize_base_url",
]
