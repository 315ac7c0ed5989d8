"""What the session lends the ``codemode`` tool (:class:`CodemodeHost`): shared by the tool's
definition (:mod:`.tool`, every session) and a call's run (:mod:`.script`, the first call)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from pitrio.actors.tool_executor.codemode import describe as text
from pitrio.actors.tool_executor.tool import AgentTool

Search = Callable[[str, Sequence[AgentTool], int], list[str]]
"""``search(query, tools, limit)``: the names of the best matches, best first."""


@attrs.frozen
class CodemodeHost:
    """What the session lends the tool; each part may be missing (a bare executor)."""

    branch_entries: Callable[[], Awaitable[Sequence[Any]]] | None = None
    append_entry: Callable[[str, Any], Awaitable[Any]] | None = None
    search: Search | None = None
    mode: str = "on"
    inline_budget: int | None = text.DEFAULT_INLINE_BUDGET
    reach: Callable[[str], Awaitable[Sequence[AgentTool]]] | None = None
    """Waits for the MCP servers a script names (every one when it discovers tools), as
    1.6.0's ``reachesTools``; the session's callable tools after the wait."""
