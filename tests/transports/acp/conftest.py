"""Fixtures of the ACP tests."""

from tests.transports.acp.harness import work

__all__ = ["work"]
