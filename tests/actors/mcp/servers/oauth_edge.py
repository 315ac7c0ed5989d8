"""An OAuth-protected streamable-HTTP MCP server: ``python oauth_edge.py PORT_FILE [TTL]``.

With ``OAUTH_EDGE_CLIENT=id:secret:redirect_uri`` in its environment that client is
registered from the start (a client configured with ``oauth.clientId``). More knobs, each
from the environment:

* ``OAUTH_EDGE_LOG=path``: one line per grant at ``/token`` (``code <scope>`` or
  ``refresh <refresh token>``), so a test counts the refreshes.
* ``OAUTH_EDGE_GATE=N``: a refresh is answered only once N requests to ``/mcp`` that
  carried a bearer token were rejected with a 401, so N clients that race to refresh one
  token are all past their 401 before the first refresh can finish (the deterministic
  form of "at once").
* ``OAUTH_EDGE_STEP_UP=path``: once that file exists, a token granted without the scope
  it names gets a 403 ``insufficient_scope`` challenge naming it at ``/mcp`` (the file is
  read on each request, so a test raises the demand after signing in).
* ``OAUTH_EDGE_REQUESTS=path``: one line per request (``GET /path``).
* ``OAUTH_EDGE_WRONG_AS=1``: the protected resource metadata names an authorization server
  that does not exist (the case ``oauth.authServerMetadataUrl`` is for); the real metadata
  is also served at ``/configured-metadata``.

The same process is the authorization server (metadata, dynamic client registration,
``/authorize``, ``/token``) and the resource server at ``/mcp``, built from the ``mcp`` SDK's
server-side auth pieces. ``/authorize`` approves at once: it redirects to the client's
callback with a code, so a test "browser" is an HTTP client that follows the URL. Access
tokens live TTL seconds (default 3600); each issued token is numbered (``at-1``, ``at-2``...)
so a test sees a refresh. The ``whoami`` tool answers with the bearer token of its request.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class ApprovingProvider:
    """An in-memory authorization server that approves every request."""

    def __init__(self, ttl: int, log: Path | None = None, gate: int = 0) -> None:
        self.ttl = ttl
        self.log = log
        self.gate = gate
        self.rejected = 0
        self.gate_open = anyio.Event()
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.issued = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        # Any scope may be asked for: the SDK's /authorize checks it against the registration.
        client_info.scope = " ".join(sorted({*(client_info.scope or "").split(), *SCOPES}))
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        self.issued += 1
        token = f"at-{self.issued}"
        refresh = f"rt-{self.issued}"
        self.access[token] = AccessToken(
            token=token,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.ttl,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=token,
            token_type="Bearer",
            expires_in=self.ttl,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self._record(f"code {' '.join(authorization_code.scopes)}")
        del self.codes[authorization_code.code]
        return self._issue(
            client.client_id or "", authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self._record(f"refresh {refresh_token.token}")
        if self.gate:
            with anyio.move_on_after(30):  # a test that never sends its 401s still ends
                await self.gate_open.wait()
        del self.refresh[refresh_token.token]
        return self._issue(
            client.client_id or "", scopes or refresh_token.scopes, refresh_token.resource
        )

    def _record(self, line: str) -> None:
        if self.log is not None:
            with self.log.open("a") as handle:
                handle.write(line + "\n")

    def note_rejection(self) -> None:
        """A 401 at ``/mcp``: counted towards the gate of the refreshes."""
        self.rejected += 1
        if self.gate and self.rejected >= self.gate:
            self.gate_open.set()

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(getattr(token, "token", ""), None)


SCOPES = ("read", "write", "admin")


class Watch:
    """ASGI middleware at ``/mcp``: counts the 401s (the gate) and, with a step-up scope,
    answers a token without it with a 403 ``insufficient_scope`` challenge."""

    def __init__(self, app: Any, provider: ApprovingProvider, base: str, step_up: str) -> None:
        self.app, self.provider, self.base = app, provider, base
        self.step_up = Path(step_up) if step_up else None
        requests = os.environ.get("OAUTH_EDGE_REQUESTS")
        self.requests = Path(requests) if requests else None
        self.wrong_as = bool(os.environ.get("OAUTH_EDGE_WRONG_AS"))

    async def _elsewhere(self, scope: Any, receive: Any, send: Any) -> None:
        """Requests outside ``/mcp``: the metadata knobs."""
        path = scope["path"]
        if self.wrong_as and path.startswith("/.well-known/oauth-protected-resource"):
            body = json.dumps(
                {"resource": f"{self.base}/mcp", "authorization_servers": ["http://127.0.0.1:9/"]}
            ).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if path == "/configured-metadata":
            real = "/.well-known/oauth-authorization-server"
            scope = {**scope, "path": real, "raw_path": real.encode()}
        await self.app(scope, receive, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.requests is not None:
            with self.requests.open("a") as handle:
                handle.write(f"{scope['method']} {scope['path']}\n")
        if not scope["path"].startswith("/mcp"):
            await self._elsewhere(scope, receive, send)
            return
        headers = dict(scope["headers"])
        bearer = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
        token = await self.provider.load_access_token(bearer)
        needed = self.step_up.read_text().strip() if self.step_up and self.step_up.exists() else ""
        if needed and token is not None and needed not in token.scopes:
            challenge = (
                f'Bearer error="insufficient_scope", scope="{needed}", '
                f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [(b"www-authenticate", challenge.encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return

        async def watch(message: Any) -> None:
            if bearer and message["type"] == "http.response.start" and message["status"] == 401:
                self.provider.note_rejection()
            await send(message)

        await self.app(scope, receive, watch)


async def main(port_file: Path, ttl: int) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    log = os.environ.get("OAUTH_EDGE_LOG")
    provider = ApprovingProvider(
        ttl, Path(log) if log else None, int(os.environ.get("OAUTH_EDGE_GATE") or 0)
    )
    preset = os.environ.get("OAUTH_EDGE_CLIENT")
    if preset:
        client_id, secret, redirect = preset.split(":", 2)
        await provider.register_client(
            OAuthClientInformationFull(
                client_id=client_id,
                client_secret=secret,
                redirect_uris=[redirect],  # type: ignore[list-item]
                token_endpoint_auth_method="client_secret_post",
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
            )
        )
    server = MCPServer(
        "oauth-edge",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=True,
        ),
    )

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The bearer token of this call's HTTP request."""
        headers = ctx.headers or {}
        return f"auth={headers.get('authorization', '')}"

    app = Watch(
        server.streamable_http_app(), provider, base, os.environ.get("OAUTH_EDGE_STEP_UP", "")
    )
    serving = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    port_file.with_suffix(".tmp").write_text(str(sock.getsockname()[1]))
    port_file.with_suffix(".tmp").rename(port_file)
    await serving.serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3600)
