"""Fixtures of the transport tests: the one Chromium of the process (see
``tests.transports.browser.chromium``), defined here so that every module shares it."""

from tests.transports.browser import chromium

__all__ = ["chromium"]
