"""Fixtures of the provider tests: a scripted loopback server and a connection pool."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pitrio.actors.model_router.providers.base import HttpSettings
from pitrio.actors.model_router.providers.http import HttpPool
from tests.actors.providers.loopback import LoopbackServer, loopback_server


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    """A scripted vendor on 127.0.0.1."""
    async with loopback_server() as running:
        yield running


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    """A connection pool (proxies from the environment are ignored: tests stay on loopback)
    making one try per request: the tests of provider-level retries make their own."""
    shared = HttpPool(HttpSettings(trust_env=False, max_retries=0))
    try:
        yield shared
    finally:
        await shared.aclose()
