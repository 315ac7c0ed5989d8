"""pi 1.6.0's HTTP settings in the provider pool (providers/http_pool.py):
``httpIdleTimeoutMs``, ``websocketConnectTimeoutMs`` and ``httpProxy`` (with ``NO_PROXY``)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pitrio.actors.model_router.providers.base import HttpSettings, provider_settings
from pitrio.actors.model_router.providers.http_pool import HttpPool
from tests.actors.providers.test_transport import raw_server

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok"


def http(settings: dict[str, Any]) -> HttpSettings:
    return provider_settings(settings).http


@pytest.mark.parametrize(
    ("settings", "read", "connect"),
    [
        ({}, 300.0, 15.0),
        ({"httpIdleTimeoutMs": 1500}, 1.5, 15.0),
        ({"httpIdleTimeoutMs": 0}, math.inf, 15.0),
        ({"httpIdleTimeoutMs": "disabled"}, math.inf, 15.0),
        ({"httpIdleTimeoutMs": "soon"}, 300.0, 15.0),  # unusable: the default stays
        ({"httpIdleTimeoutMs": -5}, 300.0, 15.0),
        ({"websocketConnectTimeoutMs": 2500}, 300.0, 2.5),
        ({"websocketConnectTimeoutMs": "disabled"}, 300.0, math.inf),
        # retry.provider.timeoutMs is the provider request's own, over the idle timeout
        ({"httpIdleTimeoutMs": 1500, "retry": {"provider": {"timeoutMs": 4000}}}, 4.0, 15.0),
    ],
)
def test_timeouts_come_from_pis_settings(
    settings: dict[str, Any], read: float, connect: float
) -> None:
    got = http(settings)
    assert (got.read_timeout, got.websocket_connect_timeout) == (read, connect)


def test_http_proxy_is_read_trimmed_and_blank_is_none() -> None:
    assert http({"httpProxy": " http://p:3128 "}).proxy == "http://p:3128"
    assert http({"httpProxy": "  "}).proxy is None
    assert http({"httpProxy": 5}).proxy is None


async def test_requests_go_through_the_http_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    heads: list[bytes] = []

    def proxied(_n: int) -> bytes:
        return OK

    async with raw_server(proxied, bodies=heads) as (proxy_url, proxy_accepted):
        pool = HttpPool(HttpSettings(proxy=proxy_url, trust_env=False))
        assert pool.direct() is None  # everything goes through httpx, which routes it
        target = "http://vendor.invalid:8080/v1/messages"
        response = await pool.client.post(target, content=b'{"x":1}')
        await pool.aclose()
    assert response.status_code == 200 and response.content == b"ok"
    assert len(proxy_accepted) == 1  # the proxy got the request for a host it alone knows
    assert heads == [b'{"x":1}']


async def test_no_proxy_hosts_skip_the_http_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "example.invalid, 127.0.0.1")
    async with (
        raw_server(lambda _n: OK) as (proxy_url, proxy_accepted),
        raw_server(lambda _n: OK) as (vendor_url, vendor_accepted),
    ):
        pool = HttpPool(HttpSettings(proxy=proxy_url, trust_env=False))
        response = await pool.client.post(vendor_url + "/v1/x", content=b"{}")
        await pool.aclose()
    assert response.status_code == 200
    assert (len(proxy_accepted), len(vendor_accepted)) == (0, 1)


def test_a_star_in_no_proxy_turns_the_proxy_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from pitrio.actors.model_router.providers.http_pool import proxy_mounts

    assert proxy_mounts("http://p:1", {"NO_PROXY": "*"}) == {}
    mounts = proxy_mounts("http://p:1", {"no_proxy": ".corp.example"})
    assert mounts["all://corp.example"] is None and mounts["all://*.corp.example"] is None
    assert mounts["http://"] is mounts["https://"] is not None


async def test_a_disabled_idle_timeout_still_carries_requests() -> None:
    async with raw_server(lambda _n: OK) as (url, accepted):
        pool = HttpPool(HttpSettings(read_timeout=math.inf, trust_env=False))
        assert pool.direct() is not None
        response = await pool.client.post(url + "/v1/x", content=b"{}")
        await pool.aclose()
    assert (response.status_code, response.content, len(accepted)) == (200, b"ok", 1)
