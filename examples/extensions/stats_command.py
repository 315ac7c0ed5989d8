"""A ``/stats`` command: counts of the session's entries and messages, shown to the client.

Typed as a prompt (``/stats``), it runs instead of reaching the model, even while a run
streams. The numbers go out as a ``notify`` UI request and are also kept in the session as a
``custom`` entry (extension state, never sent to the model).
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def setup(api: Any) -> None:
    """Register ``/stats``."""

    async def stats(args: str, ctx: Any) -> None:
        entries = await ctx.session_manager.entries()
        kinds = Counter(entry.type for entry in entries)
        roles = Counter(
            entry.message.role for entry in entries if getattr(entry, "type", "") == "message"
        )
        text = f"{len(entries)} entries; " + ", ".join(
            f"{role}: {count}" for role, count in sorted(roles.items())
        )
        await ctx.ui.notify(text, "info")
        await api.append_entry("stats", {"entries": dict(kinds), "messages": dict(roles)})

    api.register_command("stats", stats, description="Show counts of this session's entries")
