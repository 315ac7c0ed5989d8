"""The tool executor actor: one session's tool registry, and the processes its tools leave.

The actor owns the registry (definitions, allow/deny lists, active set; see
:mod:`~pitrio.actors.tool_executor.registry`) and the process groups its ``bash`` tool started
(:class:`~pitrio.actors.tool_executor.processes.ProcessGroups`): when the actor ends, for any
reason, every group still alive is ended too, so no command outlives its session.

Tool calls do not run inside the actor. The agent loop snapshots the active tools at the start
of a run and runs each batch in its own task (:func:`~pitrio.actors.tool_executor.batch.
run_tool_batch`), each body through :meth:`ToolExecutorHandle.execute`; abort is the run's
cancel scopes, with no message round trip.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors._actor import Actor, Address, Handle, Reply
from pitrio.actors.latest import Latest, LatestReader
from pitrio.actors.tool_executor.processes import ProcessGroups
from pitrio.actors.tool_executor.registry import DEFAULT_ACTIVE_TOOLS, PromptEntry, ToolRegistry
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.actors.tool_executor.tools import BuiltinSettings, create_builtin_tools
from pitrio.messages.agent import AgentToolResult

if TYPE_CHECKING:
    from pitrio.actors.tool_executor.batch import AbortScopes, BatchResult, Emit, ToolBatch


@attrs.frozen
class RegisterTools:
    """Add (or replace, by name) tools; ``activate`` also makes them active.

    Answered with the names registered (tools outside the allow/deny lists are left out).
    """

    tools: tuple[AgentTool, ...]
    activate: bool
    reply: Reply[tuple[str, ...]]


@attrs.frozen
class SetActiveTools:
    """Make exactly the named tools active, in the given order; unknown names are an error."""

    names: tuple[str, ...]
    reply: Reply[None]


@attrs.frozen
class GetAllTools:
    """Ask for every registered tool, active or not, in registration order."""

    reply: Reply[tuple[AgentTool, ...]]


@attrs.frozen
class ActiveTools:
    """What the executor publishes for its handles: the active tools, in order, and their
    system-prompt lines."""

    tools: tuple[AgentTool, ...]
    prompt_entries: tuple[PromptEntry, ...]
    callable: tuple[AgentTool, ...] = ()
    """What tools may call through nested calls (:meth:`ToolRegistry.callable_tools`)."""


@attrs.frozen
class UnregisterTools:
    """Remove tools by name (an MCP server an extension unregistered)."""

    names: tuple[str, ...]
    reply: Reply[None]


ToolExecutorCommand = RegisterTools | SetActiveTools | GetAllTools | UnregisterTools


class ToolExecutor(Actor[ToolExecutorCommand]):
    """Owns one session's tool registry, active tool set and child process groups.

    ``tools`` are custom tools (the Python API). With ``builtin`` the seven built-in tools are
    created for ``cwd`` (default: the process's working directory) and registered first;
    custom tools of the same name replace them. The active set is ``active`` if given, else
    ``read, bash, edit, write`` plus the custom tools (with built-ins) or all the tools
    (without); with an ``allow`` list every allowed tool is active. ``allow`` and ``deny`` are
    name lists where ``*`` matches any characters.
    """

    def __init__(
        self,
        tools: Iterable[AgentTool] = (),
        *,
        builtin: bool = False,
        cwd: str | None = None,
        settings: BuiltinSettings | None = None,
        active: Sequence[str] | None = None,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] = (),
        capacity: int = 32,
    ) -> None:
        super().__init__(name="tool-executor", capacity=capacity)
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.processes = ProcessGroups()
        self._registry = ToolRegistry(allow=allow, deny=deny)
        builtins: tuple[str, ...] = ()
        if builtin:
            made = create_builtin_tools(self.cwd, settings, self.processes)
            builtins = self._registry.register(made, activate=False)
        custom = self._registry.register(tools, activate=False)
        if active is not None:
            wanted = list(active)
        elif builtin:
            wanted = [name for name in DEFAULT_ACTIVE_TOOLS if name in builtins]
            wanted += [name for name in custom if name not in wanted]
        else:
            wanted = list(custom)
        if self._registry.has_allow_list:
            wanted += [tool.name for tool in self._registry.all_tools()]
        registered = {tool.name for tool in self._registry.all_tools()}
        self._registry.set_active([name for name in wanted if name in registered])
        # The active tools and their prompt lines are read at every run and every prompt;
        # handles read the latest snapshot instead of asking (see ``pitrio.actors.latest``).
        self._view = Latest(self._snapshot())
        self.address.published = self._view.reader()

    def _snapshot(self) -> ActiveTools:
        return ActiveTools(
            tools=self._registry.active_tools(),
            prompt_entries=self._registry.prompt_entries(),
            callable=self._registry.callable_tools(),
        )

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[Address[ToolExecutorCommand]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve commands; on the way out (closed, cancelled or failed) end live processes."""
        try:
            await super().run(task_status=task_status)
        finally:
            with trio.CancelScope(shield=True):
                await self.processes.terminate_all()

    async def handle(self, command: ToolExecutorCommand) -> None:
        """Answer one registry command; a refused definition fails only that command."""
        match command:
            case RegisterTools(tools=tools, activate=activate, reply=reply):
                try:
                    names = self._registry.register(tools, activate=activate)
                except Exception as exc:
                    reply.fail(exc)
                else:
                    self._view.publish(self._snapshot())  # before the reply: see the module
                    reply.set(names)
            case SetActiveTools(names=names, reply=reply):
                try:
                    self._registry.set_active(names)
                except Exception as exc:
                    reply.fail(exc)
                else:
                    self._view.publish(self._snapshot())
                    reply.set(None)
            case GetAllTools(reply=reply):
                reply.set(self._registry.all_tools())
            case UnregisterTools(names=names, reply=reply):
                self._registry.unregister(names)
                self._view.publish(self._snapshot())
                reply.set(None)


class ToolExecutorHandle(Handle[ToolExecutorCommand]):
    """Typed access to a :class:`ToolExecutor`."""

    async def register(self, *tools: AgentTool, activate: bool = True) -> tuple[str, ...]:
        """Register tools (replacing same-named ones), active unless ``activate`` is false.

        Returns the names registered; raises
        :class:`~pitrio.errors.ToolRegistryError` for an invalid definition.
        """
        return await self.ask(lambda reply: RegisterTools(tuple(tools), activate, reply))

    async def unregister(self, names: Sequence[str]) -> None:
        """Remove the tools ``names`` (unknown ones are ignored)."""
        await self.ask(lambda reply: UnregisterTools(tuple(names), reply))

    async def set_active(self, names: Sequence[str]) -> None:
        """Make exactly ``names`` the active tools."""
        await self.ask(lambda reply: SetActiveTools(tuple(names), reply))

    async def active_tools(self) -> tuple[AgentTool, ...]:
        """The active tools, in order (the executor's latest snapshot: no round trip)."""
        return self._published().tools

    async def callable_tools(self) -> tuple[AgentTool, ...]:
        """The tools nested calls may reach (latest snapshot: no round trip)."""
        return self._published().callable

    async def all_tools(self) -> tuple[AgentTool, ...]:
        """Every registered tool, in registration order."""
        return await self.ask(GetAllTools)

    async def prompt_entries(self) -> tuple[PromptEntry, ...]:
        """The system-prompt lines of the active tools (spec §5.9; no round trip)."""
        return self._published().prompt_entries

    def _published(self) -> ActiveTools:
        self._check_alive()
        reader: LatestReader[ActiveTools] = self._address.published
        return reader.get()

    async def execute(
        self, tool: AgentTool, tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
    ) -> AgentToolResult:
        """Run one call of ``tool`` in the caller's task; exceptions propagate to the caller."""
        return await tool.execute(tool_call_id, args, on_update)

    async def run_batch(
        self, batch: ToolBatch, *, emit: Emit, abort: AbortScopes | None = None
    ) -> BatchResult:
        """Run a batch in the caller's task (:func:`run_tool_batch`), bodies via :meth:`execute`."""
        # Here: the batch's modules wait for the first tool call (cold start, issue 38); a
        # caller that built ``batch`` has imported them already.
        from pitrio.actors.tool_executor.batch import run_tool_batch

        return await run_tool_batch(batch, emit=emit, abort=abort, execute=self.execute)
