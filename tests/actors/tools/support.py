"""Helpers for the tool tests: run a tool body, inspect the process table."""

from __future__ import annotations

import os
import secrets
from typing import Any

from pitrio.actors.procfs import ENDED_STATES, proc_stat
from pitrio.actors.tool_executor.tool import AgentTool
from pitrio.messages.agent import AgentToolResult


async def run_one(
    tool: AgentTool, args: dict[str, Any], call_id: str = "call_1"
) -> tuple[AgentToolResult, list[AgentToolResult]]:
    """Run a tool body directly; returns its result and the partial results it reported."""
    updates: list[AgentToolResult] = []

    async def on_update(partial: AgentToolResult) -> None:
        updates.append(partial)

    return await tool.execute(call_id, args, on_update), updates


def text(result: AgentToolResult) -> str:
    """The text of a result's text blocks."""
    return "".join(getattr(block, "text", "") for block in result.content)


def live_processes() -> list[tuple[int, str, str]]:
    """``(pid, state, command line)`` of every process that is not a zombie."""
    found = []
    for name in os.listdir("/proc"):
        fields = proc_stat(int(name)) if name.isdigit() else None
        if not fields or fields[0] in ENDED_STATES:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(name), fields[0].decode(), cmdline))
    return found


def alive_with_marker(marker: str) -> list[tuple[int, str, str]]:
    """Live processes whose command line mentions ``marker``."""
    return [proc for proc in live_processes() if marker in proc[2]]


def unique_marker() -> str:
    """A ``sleep`` duration (about 30 s) no other test run uses, to find our processes by."""
    return f"30.{secrets.randbelow(10**9):09d}"
