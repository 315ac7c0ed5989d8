"""``pitrio mcp login``'s sign-in: the browser flow against a loopback callback (or a
redirect URL the user pastes, when the browser runs on another machine).

The user's browser is sent to the authorization URL; the authorization server redirects it
to ``oauth.callbackUrl`` (default ``http://127.0.0.1/callback``; its port, else
``oauth.callbackPort``, else the stored client's or a free one: see :mod:`.oauth_settings`),
where a one-request-at-a-time HTTP listener takes the code and the state. The ``mcp`` SDK
does the rest (discovery, registration unless ``oauth.clientId`` is set, PKCE, the token
request).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import suppress
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import trio
from mcp import ClientSession
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull

from pitrio.actors.mcp.actor import CLIENT_INFO, list_all_tools, open_transport
from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.oauth import (
    CredentialFile,
    McpSignInRequired,
    ServerStorage,
    StoredOAuth,
    client_metadata,
    configured_metadata_url,
)
from pitrio.actors.mcp.oauth_settings import Loopback, loopback
from pitrio.actors.mcp.values import resolve_values
from pitrio.errors import PitrioError

MAX_REQUEST = 16 * 1024
"""Bytes of a callback request read before giving up on it (a browser sends far fewer)."""

PAGE_OK = (
    "<!doctype html><title>Signed in</title>"
    "<p>Signed in to the MCP server. You may close this page.</p>"
)
PAGE_BAD = "<!doctype html><title>Sign-in failed</title><p>{}</p>"


class SignInError(PitrioError):
    """The sign-in could not finish (refused, or the callback said so)."""


def sign_in_challenge(exc: BaseException) -> dict[str, str] | None:
    """When ``exc`` (or an error in its groups or causes) says only a sign-in lets us in, the
    server's last challenge (``{}`` when it sent none); else ``None``."""
    if isinstance(exc, McpSignInRequired):
        return exc.challenge
    if isinstance(exc, BaseExceptionGroup):
        found = (sign_in_challenge(inner) for inner in exc.exceptions)
        return next((challenge for challenge in found if challenge is not None), None)
    return None if exc.__cause__ is None else sign_in_challenge(exc.__cause__)


def sign_in_needed(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error in its groups) says only a sign-in lets us in."""
    return sign_in_challenge(exc) is not None


def merge_scopes(*scopes: str | None) -> str | None:
    """The scopes of every list, each once, in order of appearance (``None`` when none)."""
    merged = dict.fromkeys(word for scope in scopes for word in (scope or "").split())
    return " ".join(merged) or None


def requested_scope(
    configured: str | None, granted: str | None, challenge: dict[str, str]
) -> str | None:
    """pi's scope for a sign-in: the entry's ``oauth.scope`` plus what the server asked for.
    A step-up (``insufficient_scope``) keeps the scope granted so far, since its challenge
    may name only the missing scopes; without challenged scopes the flow picks its default."""
    asked = challenge.get("scope")
    if challenge.get("error") == "insufficient_scope":
        asked = merge_scopes(granted, asked) if asked else None
    return merge_scopes(configured, asked)


_SERVER_METADATA_PATHS = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)


class SignInOAuth(StoredOAuth):
    """The SDK's sign-in, asking for ``scope`` when one is set (pi's rule: the configured and
    challenged scope wins over what discovery advertises, which the SDK would take), and
    reading the authorization server's metadata from ``metadata_url`` when one is set: it is
    fetched first, its issuer is the one expected, and the SDK's requests for the
    discovered server's metadata go to it instead."""

    scope: str | None = None

    async def _perform_authorization(self) -> Any:
        if self.scope:
            self.context.client_metadata.scope = self.scope
        return await super()._perform_authorization()

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.metadata_url is not None and self.context.oauth_metadata is None:
            await self._take_metadata((yield self._metadata_request()))
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                if self.metadata_url is not None and outgoing.url.path.startswith(
                    _SERVER_METADATA_PATHS
                ):
                    outgoing = self._metadata_request()
                outgoing = await flow.asend((yield outgoing))
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


async def connect_and_list(config: McpServerConfig, cwd: str, auth: Any = None) -> int:
    """Connect (with ``auth``, else the stored credentials) and count the server's tools."""
    async with (
        open_transport(config, cwd, None, auth) as (read, write),
        ClientSession(read, write, client_info=CLIENT_INFO) as session,
    ):
        await session.initialize()
        return len(await list_all_tools(session))


NO_DOCUMENTS = (
    'oauth.clientRegistration "cimd" needs a Client ID Metadata Document, and pitrio has '
    'none (pi\'s are pi\'s identity); use "auto" or "dcr"'
)


async def _listen(settings: Loopback, registered: str | None) -> trio.SocketListener:
    """The callback's listener: on the configured port, else on the port of the stored
    client's redirect URI (so that client stays usable) when it is free, else any port."""
    port = settings.port
    if port is None and registered:
        port = urlsplit(registered).port
    try:
        return (await trio.open_tcp_listeners(port or 0, host=settings.bind_host))[0]
    except OSError:
        if settings.port is not None or port is None:
            raise
        return (await trio.open_tcp_listeners(0, host=settings.bind_host))[0]


class LoopbackCallback:
    """The redirect target: answers each request, keeps the first with a code or error."""

    def __init__(self, listener: trio.SocketListener, settings: Loopback) -> None:
        self.listener = listener
        self.path = settings.path
        self.redirect_uri = settings.redirect_for(listener.socket.getsockname()[1])
        """What the authorization server is told to redirect to."""
        self._result: AuthorizationCodeResult | SignInError | None = None
        self._arrived = trio.Event()

    async def serve(self) -> None:
        """Accept connections until cancelled."""
        await trio.serve_listeners(self._handle, [self.listener])

    async def wait(self) -> AuthorizationCodeResult:
        """The authorization response (raises :class:`SignInError` for an error response)."""
        await self._arrived.wait()
        if isinstance(self._result, SignInError):
            raise self._result
        assert self._result is not None
        return self._result

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            with trio.move_on_after(10):
                while b"\r\n\r\n" not in data and len(data) < MAX_REQUEST:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
            line = data.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            target = line[1] if len(line) >= 2 else ""
            status, page = self._take(target)
            body = page.encode()
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            # A browser that went away does not matter: the code (if any) is kept.
            with suppress(trio.BrokenResourceError):
                await stream.send_all(head.encode() + body)

    def offer(self, url: str) -> bool:
        """A redirect URL the user pasted (the browser could not reach this machine); whether
        it carried the authorization response."""
        parts = urlsplit(url.strip())
        self._take(f"{parts.path}?{parts.query}")
        return self._arrived.is_set()

    def _take(self, target: str) -> tuple[str, str]:
        parts = urlsplit(target)
        if parts.path != self.path:
            return "404 Not Found", PAGE_BAD.format("Not found.")
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        if self._arrived.is_set():
            return "200 OK", PAGE_OK
        if "error" in query:
            described = query.get("error_description") or query["error"]
            self._result = SignInError(f"the authorization server refused: {described}")
            self._arrived.set()
            return "400 Bad Request", PAGE_BAD.format("Sign-in failed.")
        if "code" not in query:
            return "400 Bad Request", PAGE_BAD.format("No authorization code.")
        self._result = AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )
        self._arrived.set()
        return "200 OK", PAGE_OK


async def _configured_client(
    config: McpServerConfig, redirect_uri: str
) -> OAuthClientInformationFull | None:
    """``oauth.clientId`` / ``clientSecret`` as the SDK's registered client, if set."""
    oauth = config.entry.get("oauth") or {}
    client_id = oauth.get("clientId")
    if not isinstance(client_id, str) or not client_id:
        return None
    secret = oauth.get("clientSecret")
    if isinstance(secret, str) and secret:
        secret = (
            await resolve_values({"clientSecret": secret}, f'MCP server "{config.name}" oauth')
        )["clientSecret"]
    else:
        secret = None
    return OAuthClientInformationFull(
        client_id=client_id,
        client_secret=secret,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        token_endpoint_auth_method="client_secret_post" if secret else "none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )


async def sign_in(
    config: McpServerConfig,
    cwd: str,
    show_url: Callable[[str], None],
    file: CredentialFile | None = None,
    pasted: Callable[[], Awaitable[str | None]] | None = None,
    challenge: dict[str, str] | None = None,
) -> int:
    """Run the browser sign-in and connect with the new tokens; the server's tool count.

    ``challenge`` is the server's last ``WWW-Authenticate`` challenge (from the connection
    that failed); its scope is asked for on top of ``oauth.scope``.

    ``show_url`` is given the authorization URL (to print and open); ``pasted``, when given,
    is asked once after it for the URL the browser was redirected to (``None``: none), which
    finishes the sign-in as the callback would. The caller bounds the wait (``--timeout``)
    by cancelling."""
    oauth = config.entry.get("oauth") or {}
    if oauth.get("clientRegistration") == "cimd":
        raise SignInError(NO_DOCUMENTS)
    storage = ServerStorage(file or CredentialFile(), config.name, config.url)
    stored = await storage.get_client_info()
    registered = [str(url) for url in (stored.redirect_uris or [])] if stored else []
    settings = loopback(oauth)
    callback = LoopbackCallback(
        await _listen(settings, registered[0] if registered else None), settings
    )
    client = await _configured_client(config, callback.redirect_uri)
    if client is not None:
        await storage.set_client_info(client)
    elif stored is not None and callback.redirect_uri not in registered:
        # A client registered for another redirect URI cannot use this one.
        storage.file.update(config.name, config.url, {"clientInformation": None})
    granted = await storage.get_tokens()
    scope = requested_scope(
        oauth.get("scope") if isinstance(oauth.get("scope"), str) else None,
        granted.scope if granted is not None else None,
        challenge or {},
    )
    # Stale tokens would be refreshed instead of asking the user, who asked to sign in.
    storage.file.update(config.name, config.url, {"tokens": None, "tokensExpireAt": None})

    async def read_pasted() -> None:
        assert pasted is not None
        text = await pasted()
        if text:
            callback.offer(text)

    async with trio.open_nursery() as nursery:

        async def redirect(url: str) -> None:
            show_url(url)
            if pasted is not None:
                nursery.start_soon(read_pasted)

        auth = SignInOAuth(
            storage, client_metadata(config, callback.redirect_uri), redirect, callback.wait
        )
        auth.scope = scope
        auth.metadata_url = configured_metadata_url(config)
        nursery.start_soon(callback.serve)
        try:
            return await connect_and_list(config, cwd, auth)
        finally:
            nursery.cancel_scope.cancel()
