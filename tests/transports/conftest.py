"""Fixtures of the transport tests: the one Chromium of the process (see
``tests.transports.browser.chromium``), defined here so that every module shares it, and the
options of the browser fixtures' daemons."""

import pytest

from tests.transports.browser import chromium

__all__ = ["chromium"]


@pytest.fixture
def daemon_options() -> tuple[str, ...]:
    """The options ``served`` and ``mocked`` (``tests.transports.browser``) add to their
    daemons' command line: none here, the daemon's own number of workers; a module of checks
    of the page alone overrides it with ``browser.ONE_PROCESS``."""
    return ()
