"""Ask before the model runs ``rm`` through the bash tool.

Load it with ``pitrio --mode rpc -e examples/extensions/permission_gate.py`` (or copy it into
``.pitrio/extensions/``). Over RPC and websockets the question is an ``extension_ui_request``
(``confirm``) that the client answers; where nobody can answer (print and JSON modes) the call
is blocked, which is the safe default.
"""

from __future__ import annotations

import re
from typing import Any

DANGEROUS = re.compile(r"(^|[;&|(]\s*|\bsudo\s+)rm\s")
"""``rm`` as a command (first word, after a separator, or after sudo), not inside a word."""


def is_dangerous(command: str) -> bool:
    """Whether a shell command line runs ``rm``."""
    return bool(DANGEROUS.search(command.strip()))


def setup(api: Any) -> None:
    """Gate every bash call that would remove files."""

    async def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name != "bash":
            return None
        command = str(event.input.get("command", ""))
        if not is_dangerous(command):
            return None
        if not ctx.has_ui:
            return {"block": True, "reason": "rm needs a confirmation and no client can give it"}
        allowed = await ctx.ui.confirm("Allow rm?", f"The agent wants to run: {command}")
        if allowed:
            return None
        return {"block": True, "reason": "The user refused to run this rm command"}

    api.on("tool_call", gate)
