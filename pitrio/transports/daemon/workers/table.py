"""Which worker owns which session (pure: the acceptor's bookkeeping, no I/O).

The acceptor is the one place that decides ownership, so two workers never load the same
session: a connection to ``/v1/sessions/{id}`` goes to the owner, an unowned session is given to
the live worker owning fewest (ties: the lowest slot after the last one chosen), and a worker
that creates or opens a session claims it first. A worker that dies loses every session it
owned; each is given to a live worker when next asked for, which restarts it from its file
(the kernel dropped the dead worker's ``flock``) or the PostgreSQL store.
"""

from __future__ import annotations

from pitrio.errors import PitrioError


class NoWorkerError(PitrioError):
    """No worker is running (all of them are starting or restarting)."""

    retryable = True


class Table:
    """Session ownership and worker liveness of one acceptor."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("at least one worker")
        self.slots = slots
        self.live: set[int] = set()
        self.owners: dict[str, int] = {}
        self.owned = [0] * slots
        self._next = 0

    def up(self, slot: int) -> None:
        """``slot``'s worker is ready for connections."""
        self.live.add(slot)

    def down(self, slot: int) -> list[str]:
        """``slot``'s worker stopped: the sessions it owned, now unowned."""
        self.live.discard(slot)
        lost = [session for session, owner in self.owners.items() if owner == slot]
        for session in lost:
            del self.owners[session]
        self.owned[slot] = 0
        return lost

    def owner(self, session: str) -> int | None:
        """The live worker owning ``session``, if any."""
        return self.owners.get(session)

    def any(self) -> int:
        """A live worker for a connection that names no session (round robin)."""
        if not self.live:
            raise NoWorkerError("no worker is running; try again shortly")
        for step in range(self.slots):
            slot = (self._next + step) % self.slots
            if slot in self.live:
                self._next = slot + 1
                return slot
        raise AssertionError("unreachable: live is not empty")

    def route(self, session: str) -> int:
        """The owner of ``session``; an unowned one is given to :meth:`place`'s worker."""
        owner = self.owners.get(session)
        if owner is not None:
            return owner
        chosen = self.place()
        self._give(session, chosen)
        return chosen

    def place(self) -> int:
        """The live worker a new or unowned session should go to: the one owning fewest
        (ties: the first after the last one chosen)."""
        if not self.live:
            raise NoWorkerError("no worker is running; try again shortly")
        chosen = min(
            self.live, key=lambda slot: (self.owned[slot], (slot - self._next) % self.slots)
        )
        self._next = chosen + 1
        return chosen

    def claim(self, session: str, slot: int) -> int:
        """``slot`` asks to own ``session``: the owner after the claim (another live owner
        keeps it)."""
        owner = self.owners.get(session)
        if owner is not None:
            return owner
        self._give(session, slot)
        return slot

    def forget(self, session: str, slot: int) -> None:
        """``slot`` no longer has ``session`` (deleted): it is unowned again."""
        if self.owners.get(session) == slot:
            del self.owners[session]
            self.owned[slot] -= 1

    def _give(self, session: str, slot: int) -> None:
        self.owners[session] = slot
        self.owned[slot] += 1
