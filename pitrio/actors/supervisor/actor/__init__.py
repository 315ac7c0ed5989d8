"""The Supervisor's actor shell (:mod:`.shell`) and the compaction I/O it carries out
(:mod:`.compactor`): the only part of the supervisor that uses trio (its policy modules, one
level up, stay pure)."""

from pitrio.actors.supervisor.actor.shell import (
    CompactionCancelled,
    Lent,
    Supervisor,
    SupervisorHandle,
    SupervisorSettings,
    SupervisorView,
)

__all__ = [
    "CompactionCancelled",
    "Lent",
    "Supervisor",
    "SupervisorHandle",
    "SupervisorSettings",
    "SupervisorView",
]
