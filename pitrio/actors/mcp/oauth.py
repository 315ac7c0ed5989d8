"""MCP OAuth for HTTP servers, as pi 1.6.0: credentials in ``<agentDir>/mcp-auth.json``.

The file holds one state per server, keyed ``mcp__<server>|<url>`` (pi's key: the server's
namespace and its normalized URL), each ``{serverUrl, clientInformation, tokens,
tokensExpireAt, discovery}`` with pi's field names. It is written whole to a temporary file
and renamed over the old one, mode 0600.

A connection never starts a browser sign-in: with no stored tokens it sends no
``Authorization`` header and a 401 fails with :class:`McpSignInRequired`; with stored tokens
the ``mcp`` SDK's :class:`OAuthClientProvider` sends them, refreshes them when they expired or
the server rejects them, and fails the same way when it would need the user. ``pitrio mcp
login`` (:mod:`pitrio.actors.mcp.signin`) runs the SDK's browser flow (discovery, dynamic
client registration or the entry's client, PKCE) against a loopback callback.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import create_oauth_metadata_request
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)

from pitrio.actors.mcp.auth_lock import (
    acquire_refresh_lock,
    file_locked,
    refresh_lock_target,
    release_refresh_lock,
    renew_refresh_lock,
)
from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.state import McpServerError
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.session_store.paths import agent_dir
from pitrio.errors import PitrioError

AUTH_FILE = "mcp-auth.json"
CLIENT_NAME = "pitrio"
"""The name a dynamically registered client gets (pi registers as ``pi``)."""


class McpSignInRequired(McpServerError):
    """The server wants OAuth credentials the user has to grant (``pitrio mcp login``).

    ``challenge`` holds the fields of the server's last ``WWW-Authenticate`` challenge (its
    ``scope``, ``error``, ``resource_metadata``), which the sign-in uses."""

    challenge: dict[str, str]


def sign_in_required(
    name: str, challenge: dict[str, str] | None = None, provider: str | None = None
) -> McpSignInRequired:
    """The error a connection fails with when only a sign-in can let it in (for a server
    that sends a provider's token, ``auth.provider``: a login to that provider)."""
    how = f"pitrio login {provider}" if provider else f"pitrio mcp login {name}"
    error = McpSignInRequired(f'MCP server "{name}" requires sign-in. Run {how} to sign in.')
    error.challenge = dict(challenge or {})
    return error


def auth_provider(config: McpServerConfig) -> str | None:
    """The provider whose token an HTTP server gets (``auth.provider``), if it has one."""
    if config.transport == "stdio":
        return None
    auth = config.entry.get("auth")
    provider = auth.get("provider") if isinstance(auth, dict) else None
    return provider if isinstance(provider, str) and provider else None


def uses_oauth(config: McpServerConfig) -> bool:
    """pi's rule: an HTTP server whose headers set no ``Authorization`` and that has no
    ``auth``."""
    if config.transport == "stdio" or not config.url or auth_provider(config):
        return False
    return not any(key.lower() == "authorization" for key in config.headers)


def normalized_url(url: str) -> str:
    """The URL as WHATWG's serializer writes it for the cases that matter to the key
    (lower-case scheme and host, ``/`` for an empty path)."""
    parts = urlsplit(url)
    return urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, "")
    )


def store_key(name: str, url: str) -> str:
    """pi's key of a server's state: its tool namespace and its URL."""
    return f"mcp__{name.replace('-', '_')}|{normalized_url(url)}"


class CredentialFile:
    """``mcp-auth.json``: read whole and written whole (atomically, mode 0600), each time under
    pi's lock on the file (:func:`~pitrio.actors.mcp.auth_lock.file_locked`), so that an edit
    by pi or another pitrio between our read and our write is never lost."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else agent_dir() / AUTH_FILE

    @property
    def agent(self) -> Path:
        """The directory of the file, where pi keeps the refresh locks."""
        return self.path.parent

    def states(self) -> dict[str, Any]:
        """Every stored state; ``{}`` for a missing, empty or malformed file."""
        with file_locked(self.path) as real:
            return _read_states(real)

    def _edit(self, change: Callable[[dict[str, Any]], bool]) -> bool:
        """Read, apply ``change`` and, when it says so, write back, all under the lock."""
        with file_locked(self.path) as real:
            states = _read_states(real)
            changed = change(states)
            if changed:
                _write_states(real, states)
            return changed

    def load(self, name: str, url: str) -> dict[str, Any] | None:
        """One server's state (also under the legacy key, the bare URL, older pi versions used)."""
        states = self.states()
        found = states.get(store_key(name, url)) or states.get(normalized_url(url))
        return found if isinstance(found, dict) else None

    def update(self, name: str, url: str, change: dict[str, Any]) -> None:
        """Merge ``change`` into a server's state (``None`` values delete fields)."""
        key = store_key(name, url)

        def merge(states: dict[str, Any]) -> bool:
            state = dict(states.get(key) or {"serverUrl": url})
            for field, value in change.items():
                if value is None:
                    state.pop(field, None)
                else:
                    state[field] = value
            states[key] = state
            states.pop(normalized_url(url), None)
            return True

        self._edit(merge)

    def remove(self, name: str, url: str) -> bool:
        """Delete a server's credentials; whether there were any."""

        def drop(states: dict[str, Any]) -> bool:
            removed = False
            for key in (store_key(name, url), normalized_url(url)):
                if key in states:
                    del states[key]
                    removed = True
            return removed

        return self._edit(drop)


def _read_states(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _write_states(path: Path, states: dict[str, Any]) -> None:
    """Replace the file's content; a reader sees the old file or the new one, never half."""
    fd, temp = tempfile.mkstemp(prefix=".mcp-auth-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(states, indent=2) + "\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class ServerStorage:
    """The SDK's ``TokenStorage`` over one server's state in the credential file."""

    def __init__(self, file: CredentialFile, name: str, url: str) -> None:
        self.file, self.name, self.url = file, name, url

    def state(self) -> dict[str, Any]:
        """The stored state (``{}`` when none)."""
        return self.file.load(self.name, self.url) or {}

    @staticmethod
    def tokens_of(state: dict[str, Any]) -> OAuthToken | None:
        """The tokens of a stored state, if any."""
        tokens = state.get("tokens")
        return OAuthToken.model_validate(tokens) if isinstance(tokens, dict) else None

    @staticmethod
    def client_of(state: dict[str, Any]) -> OAuthClientInformationFull | None:
        """The registered (or configured) client of a stored state, if any."""
        info = state.get("clientInformation")
        return OAuthClientInformationFull.model_validate(info) if isinstance(info, dict) else None

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        return self.tokens_of(self.state())

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Save tokens with pi's ``tokensExpireAt`` (milliseconds since the epoch)."""
        expires = None
        if tokens.expires_in is not None:
            expires = int((time.time() + tokens.expires_in) * 1000)
        self.file.update(
            self.name,
            self.url,
            {"tokens": tokens.model_dump(exclude_none=True), "tokensExpireAt": expires},
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The registered (or configured) client."""
        return self.client_of(self.state())

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a registered client for later sign-ins and refreshes."""
        self.file.update(
            self.name,
            self.url,
            {"clientInformation": client_info.model_dump(mode="json", exclude_none=True)},
        )

    def save_discovery(self, auth_server_url: str | None, metadata: OAuthMetadata | None) -> None:
        """Remember the authorization server, so a later process refreshes at its endpoint."""
        if metadata is None:
            return
        discovery: dict[str, Any] = {
            "authorizationServerMetadata": metadata.model_dump(mode="json", exclude_none=True)
        }
        if auth_server_url:
            discovery["authorizationServerUrl"] = auth_server_url
        self.file.update(self.name, self.url, {"discovery": discovery})


OAUTH_REQUEST_TIMEOUT_S = 15.0
"""pi's bound on a request to the authorization server, so a hung one cannot keep the
refresh lock past its staleness (20 s)."""
_REQUEST_TIMEOUT = dict.fromkeys(("connect", "read", "write", "pool"), OAUTH_REQUEST_TIMEOUT_S)


class StoredOAuth(OAuthClientProvider):
    """The SDK's provider, started from pi's stored state: the token's expiry and the
    authorization server's metadata come from the file (the SDK keeps both in memory only,
    so without this an expired stored token is sent once before it is refreshed)."""

    storage: ServerStorage
    metadata_url: str | None = None
    """``oauth.authServerMetadataUrl``: the authorization server's metadata document, used
    instead of discovery and, as pi, fetched each time rather than kept in the file."""

    def __init__(
        self,
        storage: ServerStorage,
        metadata: OAuthClientMetadata,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
    ) -> None:
        super().__init__(
            storage.url,
            metadata,
            storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        self.storage = storage

    async def _initialize(self) -> None:
        # One read of the file (each read takes pi's lock: a mkdir and an rmdir) for what
        # the SDK's own _initialize would read twice.
        state = self.storage.state()
        self.context.current_tokens = ServerStorage.tokens_of(state)
        self.context.client_info = ServerStorage.client_of(state)
        self._initialized = True
        expires = state.get("tokensExpireAt")
        self.context.token_expiry_time = (
            expires / 1000 if isinstance(expires, int | float) else None
        )
        discovery = state.get("discovery")
        configured = self.metadata_url is not None
        if isinstance(discovery, dict) and self.context.oauth_metadata is None and not configured:
            found = discovery.get("authorizationServerMetadata")
            if isinstance(found, dict):
                # A document this SDK cannot read is dropped: discovery runs again on a 401.
                with suppress(ValueError):
                    self.context.oauth_metadata = OAuthMetadata.model_validate(found)
            server = discovery.get("authorizationServerUrl")
            if isinstance(server, str):
                self.context.auth_server_url = server

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        if self.metadata_url is None:
            self.storage.save_discovery(self.context.auth_server_url, self.context.oauth_metadata)

    def _metadata_request(self) -> httpx2.Request:
        """The request for the configured metadata document."""
        assert self.metadata_url is not None
        request = create_oauth_metadata_request(self.metadata_url)
        request.extensions["timeout"] = _REQUEST_TIMEOUT
        return request

    async def _take_metadata(self, response: httpx2.Response) -> None:
        """Use the configured document's answer as the authorization server's metadata."""
        url = self.metadata_url
        if response.status_code != 200:
            raise McpServerError(
                f"HTTP {response.status_code} loading authorization server metadata from {url}"
            )
        try:
            metadata = OAuthMetadata.model_validate_json(await response.aread())
        except ValueError:
            raise McpServerError(f"Invalid authorization server metadata at {url}") from None
        self.context.oauth_metadata = metadata
        self.context.auth_server_url = str(metadata.issuer)

    def _expected_issuer(self) -> str:
        # A configured document is trusted as configured (pi): its issuer is the one expected.
        if self.metadata_url is not None and self.context.oauth_metadata is not None:
            return str(self.context.oauth_metadata.issuer)
        return super()._expected_issuer()

    def _select_authorization_server(self, advertised: list[str]) -> str:
        if self.metadata_url is not None and self.context.oauth_metadata is not None:
            return str(self.context.oauth_metadata.issuer)
        return super()._select_authorization_server(advertised)


REFRESH_SKEW_S = 30.0
"""pi refreshes a token this close to its expiry before sending it."""


def parse_challenge(header: str | None) -> dict[str, str]:
    """The fields of a ``Bearer`` (or ``DPoP``) ``WWW-Authenticate`` challenge that matter
    here: ``resource_metadata``, ``scope``, ``error``, ``error_description``."""
    if not header or header.split(None, 1)[0].lower() not in ("bearer", "dpop"):
        return {}
    found: dict[str, str] = {}
    for match in _CHALLENGE_FIELD.finditer(header):
        name, quoted, bare = match.groups()
        if name.lower() in _CHALLENGE_NAMES and name.lower() not in found:
            found[name.lower()] = quoted if quoted is not None else bare
    return found


_CHALLENGE_FIELD = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
_CHALLENGE_NAMES = ("resource_metadata", "scope", "error", "error_description")


def asks_for_authorization(response: httpx2.Response) -> bool:
    """pi's rule: a 401, or a 403 whose challenge says ``insufficient_scope``."""
    if response.status_code == 401:
        return True
    challenge = parse_challenge(response.headers.get("www-authenticate"))
    return response.status_code == 403 and challenge.get("error") == "insufficient_scope"


class ConnectionOAuth(StoredOAuth):
    """A session's connection with stored tokens, as pi's: the token is refreshed when it is
    within 30 s of expiring or the server rejects it (a 401), and only then; anything that
    would need the user fails with :class:`McpSignInRequired` (the SDK's own flow would
    start discovery, registration and a browser sign-in on the first 401). A server asking
    for more scope (``insufficient_scope``) needs a new sign-in too: a refresh keeps the
    granted scope. The last challenge is kept on the error, for the sign-in to use.

    A refresh holds pi's refresh lock from reading the tokens to saving new ones; tokens
    that changed meanwhile (another process refreshed them, or the user signed in) are used
    without refreshing."""

    challenge: dict[str, str] | None = None

    def _access_token(self) -> str | None:
        tokens = self.context.current_tokens
        return tokens.access_token if tokens is not None else None

    def _expiring(self) -> bool:
        expiry = self.context.token_expiry_time
        return expiry is not None and expiry - REFRESH_SKEW_S <= time.time()

    def _sign_in(self) -> McpSignInRequired:
        return sign_in_required(self.storage.name, self.challenge)

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        storage = self.storage
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            self.context.protocol_version = request.headers.get("mcp-protocol-version")
            for rejected in (False, True):
                if rejected or self._expiring():
                    sent = self._access_token()
                    lock = refresh_lock_target(
                        storage.file.agent, store_key(storage.name, storage.url)
                    )
                    await acquire_refresh_lock(lock)
                    try:
                        await self._initialize()  # what another process may have saved
                        if self._access_token() == sent:
                            if not self.context.can_refresh_token():
                                raise self._sign_in()
                            if self.metadata_url is not None:
                                await self._take_metadata((yield self._metadata_request()))
                            renew_refresh_lock(lock)
                            refresh = await self._refresh_token()
                            refresh.extensions["timeout"] = _REQUEST_TIMEOUT
                            refreshed = yield refresh
                            # A refusal is checked here: the SDK's handler logs a warning,
                            # which would reach the user's terminal as a stray line.
                            if refreshed.status_code != 200:
                                raise self._sign_in()
                            if not await self._handle_refresh_response(refreshed):
                                raise self._sign_in()
                    finally:
                        release_refresh_lock(lock)
                self._add_auth_header(request)
                response = yield request
                if not asks_for_authorization(response):
                    return
                self.challenge = parse_challenge(response.headers.get("www-authenticate"))
                if self.challenge.get("error") == "insufficient_scope":
                    raise self._sign_in()
            raise self._sign_in()


class ProviderToken(httpx2.Auth):
    """``auth.provider``: each request carries the provider's current token (read again from
    ``auth.json`` and the environment each time, so the provider's refreshes apply; MCP keeps
    no copy), none when the provider has none; a 401 asks for a login to the provider."""

    def __init__(self, name: str, provider: str, credentials: Credentials) -> None:
        self.name, self.provider, self.credentials = name, provider, credentials

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        self.credentials.reload()
        try:
            token = await self.credentials.api_key(self.provider)
        except PitrioError:
            token = None  # as pi: the request goes without one and a 401 says what to do
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            raise sign_in_required(self.name, provider=self.provider)


def provider_auth(config: McpServerConfig, provider: str) -> httpx2.Auth:
    """The auth of a server with ``auth.provider`` (the keys of ``auth.json`` and the
    environment; ``models.json``'s ``apiKey`` values are the model router's, not read here)."""
    credentials = Credentials(auth_path=agent_dir() / "auth.json", env=os.environ)
    return ProviderToken(config.name, provider, credentials)


class _NoCredentials(httpx2.Auth):
    """A server we hold no tokens for: send nothing, and make a 401 a sign-in request."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        response = yield request
        if asks_for_authorization(response):
            challenge = parse_challenge(response.headers.get("www-authenticate"))
            raise sign_in_required(self.name, challenge)


def client_metadata(config: McpServerConfig, redirect_uri: str) -> OAuthClientMetadata:
    """What a dynamic registration asks for (``oauth.clientName`` as the name, if set)."""
    oauth = config.entry.get("oauth") or {}
    scope = oauth.get("scope") if isinstance(oauth.get("scope"), str) else None
    name = oauth.get("clientName") if isinstance(oauth.get("clientName"), str) else CLIENT_NAME
    return OAuthClientMetadata(
        client_name=name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )


def connection_auth(config: McpServerConfig, file: CredentialFile | None = None) -> httpx2.Auth:
    """The auth a session's connection to an OAuth server uses (never a browser)."""
    storage = ServerStorage(file or CredentialFile(), config.name, config.url)
    state = storage.state()
    if not isinstance(state.get("tokens"), dict):
        return _NoCredentials(config.name)

    async def no_browser(_url: str) -> None:
        raise sign_in_required(config.name)  # never called: ConnectionOAuth has no browser step

    async def no_callback() -> AuthorizationCodeResult:
        raise sign_in_required(config.name)

    redirect = _stored_redirect(state) or "http://127.0.0.1/callback"
    auth = ConnectionOAuth(storage, client_metadata(config, redirect), no_browser, no_callback)
    auth.metadata_url = configured_metadata_url(config)
    return auth


def configured_metadata_url(config: McpServerConfig) -> str | None:
    """The entry's ``oauth.authServerMetadataUrl``, if set."""
    found = (config.entry.get("oauth") or {}).get("authServerMetadataUrl")
    return found if isinstance(found, str) else None


def _stored_redirect(state: dict[str, Any]) -> str | None:
    info = state.get("clientInformation")
    if (
        isinstance(info, dict)
        and isinstance(info.get("redirect_uris"), list)
        and info["redirect_uris"]
    ):
        return str(info["redirect_uris"][0])
    return None
