"""``pitrio serve`` raises its open-files soft limit to the hard one (a live session holds two
descriptors, so the usual 1,024 stops a daemon near 500 sessions)."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from pitrio.transports.serve import raise_open_files_limit


@pytest.fixture
def limits() -> Iterator[tuple[int, int]]:
    """This process's limits, put back afterwards."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield before
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_the_soft_limit_goes_up_to_the_hard_one(limits: tuple[int, int]) -> None:
    _, hard = limits
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.fail(f"this machine's hard limit ({hard}) leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    soft, after_hard = raise_open_files_limit()
    assert after_hard == hard
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)
    assert soft > 256
    if hard != resource.RLIM_INFINITY:
        assert soft == hard


def test_a_soft_limit_at_the_hard_one_is_left_alone(limits: tuple[int, int]) -> None:
    _, hard = limits
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # "unlimited" stays unlimited
    assert raise_open_files_limit() == (hard, hard)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
