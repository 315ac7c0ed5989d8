"""The ``google-vertex`` provider: Gemini through Vertex AI.

The body and the stream are those of :mod:`.google`; what differs is where the request goes
and how it is authorised. With a Vertex API key (``GOOGLE_CLOUD_API_KEY`` or the request's
key; pi's placeholder ``gcp-vertex-credentials`` and ``<...>`` values do not count) it goes to
``https://aiplatform.googleapis.com/v1/publishers/google/models/{model}:streamGenerateContent``
with ``x-goog-api-key``. Without one, application-default credentials (``google-auth``: the
file named by ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's user credentials, or the metadata
server) give a bearer token, and the URL names the project and the location
(``GOOGLE_CLOUD_PROJECT`` / ``GCLOUD_PROJECT``, ``GOOGLE_CLOUD_LOCATION``):
``https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/
publishers/google/models/{model}:streamGenerateContent?alt=sse``.

``google-auth`` is the optional extra ``pitrio[google]``; its blocking token fetches run in
``trio.to_thread``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio

from pitrio.actors.model_router.catalogue import adc_configured
from pitrio.actors.model_router.providers.convert import encode_json_pieces
from pitrio.actors.model_router.providers.google import (
    API as GEMINI_API,
)
from pitrio.actors.model_router.providers.google import (
    GoogleParser,
    build_body,
)
from pitrio.actors.model_router.providers.http import HttpProvider, HttpRequest, join_url
from pitrio.actors.model_router.providers.retry import RetryPolicy
from pitrio.errors import CredentialError
from pitrio.messages.model import LlmContext, Model, StreamOptions

API = "google-vertex"
API_VERSION = "v1"
DEFAULT_HOST = "https://aiplatform.googleapis.com"
CREDENTIALS_MARKER = "gcp-vertex-credentials"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
INSTALL_HINT = "pip install 'pitrio[google]'"
PROJECT_MISSING = (
    "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass "
    "project in options."
)
LOCATION_MISSING = (
    "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."
)

_VERSION_SEGMENT = re.compile(r"^v\d+(?:beta\d*)?$")


def usable_api_key(value: str | None) -> str | None:
    """``value`` when it is a real Vertex API key (not pi's ADC marker or a ``<placeholder>``)."""
    key = (value or "").strip()
    if not key or key == CREDENTIALS_MARKER or re.fullmatch(r"<[^>]+>", key):
        return None
    return key


def _has_version(base_url: str) -> bool:
    return any(_VERSION_SEGMENT.match(part) for part in urlsplit(base_url).path.split("/"))


def vertex_url(model: Model, *, project: str | None, location: str | None, api_key: bool) -> str:
    """The streaming URL of ``model``.

    A base URL holding ``{location}`` is the standard regional host (``global`` has none);
    any other base URL is taken as a collection root (no project/location path), with
    ``/v1`` added unless the base already names a version, as the Google SDK does.
    """
    method = f"publishers/google/models/{model.id}:streamGenerateContent?alt=sse"
    base = model.base_url.strip()
    if base and "{location}" not in base:
        root = base if _has_version(base) else join_url(base, API_VERSION)
        return join_url(root, method)
    if api_key:
        return join_url(join_url(DEFAULT_HOST, API_VERSION), method)
    assert project is not None and location is not None
    if base:
        host = (
            base.replace("{location}-", "").replace("{location}", "")
            if location == "global"
            else base.replace("{location}", location)
        )
    else:
        host = (
            DEFAULT_HOST
            if location == "global"
            else f"https://{location}-aiplatform.googleapis.com"
        )
    path = f"{API_VERSION}/projects/{project}/locations/{location}/{method}"
    return join_url(host, path)


# Where the Vertex converters of pi's Google SDK order an object's keys unlike the Gemini API
# ones (the body is otherwise the same): function calls, inline data. (Function declarations
# are ordered alike since pi 1.6.0: name, description, parameters.)
_VERTEX_KEYS = {
    "functionCall": ("id", "name", "args"),
    "inlineData": ("mimeType", "data"),
}


def _ordered(value: Any, first: tuple[str, ...]) -> Any:
    if not isinstance(value, dict):
        return value
    head = {key: value[key] for key in first if key in value}
    return {**head, **{k: v for k, v in value.items() if k not in head}}


def vertex_order(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a Gemini request) with its keys in the order pi's Vertex requests have."""
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        for index, part in enumerate(parts):
            for key in ("functionCall", "inlineData"):
                if isinstance(part, dict) and key in part:
                    part = {**part, key: _ordered(part[key], _VERTEX_KEYS[key])}
            parts[index] = part
    return body


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    url: str,
    auth: Mapping[str, str],
    headers: Mapping[str, str],
    settings: Any,
) -> HttpRequest:
    """The HTTP request of one streamed response (pure): the Gemini body at ``url``."""
    request_headers = {"content-type": "application/json", **auth}
    request_headers.update({name.lower(): value for name, value in headers.items()})
    return HttpRequest(
        url=url,
        headers=request_headers,
        body=encode_json_pieces(vertex_order(build_body(model, context, options, settings))),
    )


class AdcTokens:
    """Bearer tokens from application-default credentials, refreshed when they expire.

    One per provider; a lock keeps concurrent requests from refreshing twice. The credentials
    file is the environment's ``GOOGLE_APPLICATION_CREDENTIALS`` when set (pitrio's own
    environment mapping, so tests and embedders need not touch ``os.environ``), else
    ``google.auth.default()``'s search.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self._credentials: Any = None
        self._lock = trio.Lock()

    async def token(self) -> str:
        """A valid access token; :class:`CredentialError` naming the cause when none is had."""
        try:
            import google.auth
            import google.auth.exceptions
            import google.auth.transport.requests
        except ImportError:
            raise CredentialError(
                f"google-vertex needs the google-auth library: {INSTALL_HINT}"
            ) from None
        async with self._lock:
            try:
                # An abort must not wait for a token endpoint (google-auth's own limit is
                # minutes): the thread is abandoned and finishes on its own.
                if self._credentials is None:
                    self._credentials = await trio.to_thread.run_sync(
                        self._load, abandon_on_cancel=True
                    )
                credentials = self._credentials
                if not credentials.valid:
                    request = google.auth.transport.requests.Request()
                    await trio.to_thread.run_sync(
                        credentials.refresh, request, abandon_on_cancel=True
                    )
            except google.auth.exceptions.GoogleAuthError as exc:
                raise CredentialError(
                    f"Google application-default credentials failed: {exc}"
                ) from None
            token = credentials.token
        if not isinstance(token, str) or not token:
            raise CredentialError("Google application-default credentials gave no token")
        return token

    def _load(self) -> Any:
        import google.auth

        path = self.env.get("GOOGLE_APPLICATION_CREDENTIALS")
        if not path:
            credentials, _ = google.auth.default(scopes=list(SCOPES))
            return credentials
        # The loader of the file's own type (google-auth's advice: the generic loader
        # accepts any type, external ones included, and warns about it).
        try:
            kind = json.loads(Path(path).read_text(encoding="utf-8")).get("type")
        except (OSError, ValueError, AttributeError) as exc:
            raise CredentialError(
                f"Cannot read GOOGLE_APPLICATION_CREDENTIALS {path}: {exc}"
            ) from None
        if kind == "service_account":
            from google.oauth2 import service_account

            return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                path, scopes=list(SCOPES)
            )
        if kind == "authorized_user":
            from google.oauth2 import credentials as user_credentials

            return user_credentials.Credentials.from_authorized_user_file(  # type: ignore[no-untyped-call]
                path, list(SCOPES)
            )
        credentials, _ = google.auth.load_credentials_from_file(  # type: ignore[no-untyped-call]
            path, scopes=list(SCOPES)
        )
        return credentials


class GoogleVertexProvider(HttpProvider):
    """The ``google-vertex`` StreamFn (:meth:`stream`): a Vertex API key or ADC tokens."""

    api_label = API
    accept = "*/*"  # what pi's Google client (fetch) sends, streaming or not

    def retry_policy(self) -> RetryPolicy:
        """No quiet repeats: pi's Google SDK makes one request (a failure goes to auto-retry)."""
        return attrs.evolve(self.pool.settings.retry_policy(), max_retries=0)

    error_style = "google"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tokens = AdcTokens(self.credentials.env)

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """The request with a Vertex API key (``api_key``) at the collection URL."""
        env = self.credentials.env
        key = usable_api_key(api_key)
        if key is not None:
            url = vertex_url(model, project=None, location=None, api_key=True)
            auth = {"x-goog-api-key": key}
        else:
            url = vertex_url(model, project=_project(env), location=_location(env), api_key=False)
            auth = {}
        return build_request(
            model, context, options, url=url, auth=auth, headers=headers, settings=self.settings
        )

    async def prepare(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> HttpRequest:
        """A Vertex API key when one is set, else an ADC bearer token."""
        env = self.credentials.env_for(model.provider)
        key = usable_api_key(options.api_key) or usable_api_key(env.get("GOOGLE_CLOUD_API_KEY"))
        if key is None and self.credentials.configured(model.provider):
            try:
                key = usable_api_key(await self.credentials.api_key(model.provider))
            except CredentialError:
                key = None
        headers = await self.credentials.resolve_headers(
            model.headers, f"models.json providers.{model.provider}", model.provider
        )
        if key is not None:
            self.credentials.remember_secret(key)
            return self.build_request(model, context, options, api_key=key, headers=headers)
        project, location = _project(env), _location(env)
        token = await self.tokens.token()
        self.credentials.remember_secret(token)
        url = vertex_url(model, project=project, location=location, api_key=False)
        return build_request(
            model,
            context,
            options,
            url=url,
            auth={"authorization": f"Bearer {token}"},
            headers=headers,
            settings=self.settings,
        )

    def new_parser(self, model: Model) -> GoogleParser:
        """A Gemini stream parser labelled ``google-vertex``."""
        parser = GoogleParser(model)
        parser.api_label = API
        return parser


def _project(env: Mapping[str, str]) -> str:
    project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")
    if not project:
        raise CredentialError(PROJECT_MISSING)
    return project


def _location(env: Mapping[str, str]) -> str:
    location = env.get("GOOGLE_CLOUD_LOCATION")
    if not location:
        raise CredentialError(LOCATION_MISSING)
    return location


__all__ = [
    "API",
    "GEMINI_API",
    "AdcTokens",
    "GoogleVertexProvider",
    "adc_configured",
    "usable_api_key",
    "vertex_url",
]
