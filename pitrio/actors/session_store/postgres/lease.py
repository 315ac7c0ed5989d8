"""Leases across daemons (pure): who a daemon is, how long a lease lasts, when to renew it.

One writer per session: a daemon takes a session's lease before running it, which increments
the session's fence; every append carries the fence and the database refuses it once the fence
has moved. A lease lasts :attr:`LeaseTerms.duration` seconds of database time and is renewed
every :attr:`LeaseTerms.renew_interval` while the session runs. A daemon that dies stops
renewing; once the lease has expired another daemon may take it over (fence + 1), and the dead
or paused one can no longer write anything, even if it wakes up later.
"""

from __future__ import annotations

import os
import secrets
import socket

import attrs

DEFAULT_LEASE_SECONDS = 15.0


@attrs.frozen(kw_only=True)
class LeaseTerms:
    """How long a lease lasts and how often it is renewed (a third of it by default: two
    renewals may fail before it runs out)."""

    duration: float = DEFAULT_LEASE_SECONDS
    renew_every: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.duration <= 0:
            raise ValueError("a lease must last longer than 0 s")
        if self.renew_every is not None and not 0 < self.renew_every < self.duration:
            raise ValueError("leases must be renewed more often than they last")

    @property
    def renew_interval(self) -> float:
        """Seconds between renewals."""
        return self.renew_every if self.renew_every is not None else self.duration / 3


@attrs.frozen(kw_only=True)
class Owner:
    """A daemon as a lease holder: a unique id (per process) and where its clients connect."""

    id: str
    url: str | None = None

    @classmethod
    def this_process(cls, url: str | None = None) -> Owner:
        """A fresh identity: host name, pid and a random part (a restarted daemon is another
        owner, so it never mistakes its predecessor's lease for its own)."""
        return cls(id=f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}", url=url)


@attrs.define
class LeaseCounters:
    """Lease activity of one daemon, for ``/metrics`` (stores update it as they go)."""

    held: int = 0
    acquired: int = 0
    taken_over: int = 0
    refused: int = 0
    lost: int = 0
    renewals: int = 0
