"""The tool executor actor: the registry of a session's tools and the way calls are run.

For now it owns the registry (register, activate, list). A call's body runs in the caller's task
(:meth:`ToolExecutorHandle.execute`), inside the run's cancel scope, so an abort cancels it with
no message round trip; the executor's policy (ordering, process groups) wraps that call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from pitrio.actors._actor import Actor, Handle, Reply
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.errors import ToolNotFoundError
from pitrio.messages.agent import AgentToolResult


@attrs.frozen
class RegisterTools:
    """Add (or replace, by name) tools; ``activate`` also makes them active."""

    tools: tuple[AgentTool, ...]
    activate: bool
    reply: Reply[None]


@attrs.frozen
class SetActiveTools:
    """Make exactly the named tools active, in the given order; unknown names are an error."""

    names: tuple[str, ...]
    reply: Reply[None]


@attrs.frozen
class GetActiveTools:
    """Ask for the active tools, in activation order."""

    reply: Reply[tuple[AgentTool, ...]]


ToolExecutorCommand = RegisterTools | SetActiveTools | GetActiveTools


class ToolExecutor(Actor[ToolExecutorCommand]):
    """Owns one session's tool registry and active tool set."""

    def __init__(self, tools: Iterable[AgentTool] = (), *, capacity: int = 32) -> None:
        super().__init__(name="tool-executor", capacity=capacity)
        self._registry: dict[str, AgentTool] = {}
        self._active: list[str] = []
        for tool in tools:
            self._registry[tool.name] = tool
            self._active.append(tool.name)

    async def handle(self, command: ToolExecutorCommand) -> None:
        match command:
            case RegisterTools(tools=tools, activate=activate, reply=reply):
                for tool in tools:
                    self._registry[tool.name] = tool
                    if activate and tool.name not in self._active:
                        self._active.append(tool.name)
                reply.set(None)
            case SetActiveTools(names=names, reply=reply):
                unknown = [name for name in names if name not in self._registry]
                if unknown:
                    reply.fail(ToolNotFoundError(f"Unknown tool: {unknown[0]}"))
                else:
                    self._active = list(dict.fromkeys(names))
                    reply.set(None)
            case GetActiveTools(reply=reply):
                reply.set(tuple(self._registry[name] for name in self._active))


class ToolExecutorHandle(Handle[ToolExecutorCommand]):
    """Typed access to a :class:`ToolExecutor`."""

    async def register(self, *tools: AgentTool, activate: bool = True) -> None:
        """Register tools (replacing same-named ones), active unless ``activate`` is false."""
        await self.ask(lambda reply: RegisterTools(tuple(tools), activate, reply))

    async def set_active(self, names: Sequence[str]) -> None:
        """Make exactly ``names`` the active tools."""
        await self.ask(lambda reply: SetActiveTools(tuple(names), reply))

    async def active_tools(self) -> tuple[AgentTool, ...]:
        """The active tools, in order."""
        return await self.ask(GetActiveTools)

    async def execute(
        self, tool: AgentTool, tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
    ) -> AgentToolResult:
        """Run one call of ``tool`` in the caller's task; exceptions propagate to the caller."""
        return await tool.execute(tool_call_id, args, on_update)
