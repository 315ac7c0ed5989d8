"""The process's one HTTP client and its connection pool, shared by every HTTP provider.

:class:`HttpPool` builds lazily what a request needs: pitrio's own HTTP/1.1 transport (used
directly unless a proxy is set) and the httpx client over it, with pi 1.6.0's HTTP settings
(timeouts, limits, ``httpProxy`` and ``NO_PROXY``: :func:`proxy_mounts`). The requests and
their streams are :mod:`.http`'s.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from pitrio.actors.model_router.providers.base import HttpSettings

if TYPE_CHECKING:
    import ssl

    import httpx

    from pitrio.actors.model_router.providers.transport import Http11Transport

# httpx (~35 ms to import) and the transport are imported when first used, not at start-up: a
# process that never calls an HTTP provider never pays for them (issue 7, cold start).


def proxy_mounts(proxy: str, env: Mapping[str, str]) -> dict[str, Any]:
    """httpx mounts sending every request through ``proxy`` (pi 1.6.0's ``httpProxy``, which
    it applies as ``HTTP_PROXY`` and ``HTTPS_PROXY``), except to the hosts ``NO_PROXY`` names
    (a ``*`` there: no proxy at all), which keep the direct transport."""
    import httpx

    through = httpx.AsyncHTTPTransport(proxy=proxy)
    mounts: dict[str, Any] = {"http://": through, "https://": through}
    exempt = env.get("NO_PROXY", env.get("no_proxy", ""))
    for host in (part.strip() for part in exempt.split(",")):
        if host == "*":
            return {}
        if host:
            bare = host.lstrip(".")
            mounts[f"all://{bare}"] = None
            mounts[f"all://*.{bare}"] = None
    return mounts


class HttpPool:
    """The process's one HTTP client: every provider and session shares its connections.

    Owned by the ModelRouter, which closes it when it stops.
    """

    def __init__(self, settings: HttpSettings | None = None) -> None:
        self.settings = settings or HttpSettings()
        self._client: httpx.AsyncClient | None = None
        self._transport: Http11Transport | None = None
        self._direct: bool | None = None
        self.closers: list[Callable[[], Awaitable[None]]] = []
        """Also run by :meth:`aclose`: connections a provider keeps outside the pool (the
        Codex WebSocket sessions)."""

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared client, created on first use (building its TLS context costs tens of
        milliseconds, which a process that never calls a real provider should not pay)."""
        if self._client is None:
            self._client = self._new_client()
        return self._client

    @property
    def transport(self) -> Http11Transport:
        """The connection pool under the client (and under :meth:`direct`)."""
        if self._transport is None:
            from pitrio.actors.model_router.providers.transport import Http11Transport

            settings = self.settings

            def ssl_context() -> ssl.SSLContext:
                import httpx

                return httpx.create_ssl_context(trust_env=settings.trust_env)

            self._transport = Http11Transport(
                max_connections=settings.max_connections,
                max_keepalive=settings.max_keepalive,
                ssl_context=ssl_context,
            )
        return self._transport

    def direct(self) -> Http11Transport | None:
        """The transport to use without the client, unless the environment names a proxy
        (then every request goes through httpx, which routes it). Per request the client's
        layers cost about as much CPU as the transport itself (issue 7)."""
        if self._direct is None:
            names = {"http_proxy", "https_proxy", "all_proxy"}
            self._direct = self.settings.proxy is None and not (
                self.settings.trust_env
                and any(key.lower() in names and value for key, value in os.environ.items())
            )
        return self.transport if self._direct else None

    def _new_client(self) -> httpx.AsyncClient:
        import httpx

        settings = self.settings
        return httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=settings.connect_timeout,
                read=settings.read_timeout,
                write=settings.write_timeout,
                pool=settings.pool_timeout,
            ),
            limits=httpx.Limits(
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_keepalive,
            ),
            trust_env=settings.trust_env,
            mounts=proxy_mounts(settings.proxy, os.environ) if settings.proxy else None,
            follow_redirects=False,
            # Direct connections through pitrio's lean HTTP/1.1 transport (half the CPU per
            # request of httpcore + h11, issue 7); proxies from the environment still get
            # httpx's own transports (it mounts them for the URLs they cover).
            transport=cast("httpx.AsyncBaseTransport", self.transport),  # one by its methods
        )

    async def aclose(self) -> None:
        """Close every pooled connection (the pool can be used again afterwards)."""
        for closer in self.closers:
            await closer()
        client, self._client = self._client, None
        transport, self._transport = self._transport, None
        if client is not None:
            await client.aclose()  # closes the transport too
        elif transport is not None:
            await transport.aclose()
