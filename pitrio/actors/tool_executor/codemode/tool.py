"""The ``codemode`` tool (pi 1.6.0): the model's JavaScript calls the session's other tools.

Each ``tools.<name>(args)`` of a script is a nested call of the codemode call
(:meth:`~pitrio.actors.tool_executor.context.ToolCallContext.execute_tool`): the same lookup,
validation, hooks, events with ``parentToolCallId`` and abort as any call, against the tools
other tools may call (active ``direct`` ones, every ``codemode`` / ``deferred`` one). What a
call gives the script: a tool with an ``output_schema`` its ``structured_content``, any other
its text; a failed call rejects with its text. ``details.calls`` lists the script's calls as
they go (``running``, ``ok``, ``error``, ``cancelled``), also in each update.

The session gives the tool what it cannot reach itself (:class:`CodemodeHost`): the
``codemode-store`` entries of the branch, appending one, and ranked search. A call's script is
run by :mod:`.script`, imported by the first call.
"""

from __future__ import annotations

from typing import Any

from pitrio.actors.tool_executor.codemode import describe as text
from pitrio.actors.tool_executor.codemode.host import CodemodeHost, Search
from pitrio.actors.tool_executor.registry import mark_schema_valid
from pitrio.actors.tool_executor.tool import AgentTool, Loadout, LoadoutChange, UpdateFn
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.shared import shared

__all__ = ["PARAMETERS", "CodemodeHost", "Search", "create_codemode_tool"]

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Raw JavaScript source."}},
    "required": ["code"],
}
# Registered (inactive) in every session: trusted like the built-in tools' schemas, so the
# start does not import jsonschema to check it (issue 38, cold start; a test checks it).
mark_schema_valid(PARAMETERS)


def create_codemode_tool(host: CodemodeHost | None = None) -> AgentTool:
    """The ``codemode`` tool, registered inactive (``--tools +codemode``, ``defaultTools``,
    or an MCP server whose tools are reached from scripts activates it)."""
    host = host or CodemodeHost()

    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        from pitrio.actors.tool_executor.codemode.script import run_call  # the first call

        return await run_call(host, args, on_update)

    def prepare(loadout: Loadout) -> LoadoutChange:
        descriptions = text.loadout_descriptions(
            loadout.declared, loadout.callable, mode=host.mode, inline_budget=host.inline_budget
        )
        hidden: frozenset[str] = frozenset()
        if host.mode == "only":  # scripts reach them: their declarations are left out
            declared = {tool.name for tool in loadout.declared}
            hidden = frozenset(
                tool.name
                for tool in loadout.callable
                if tool.exposure == "direct" and tool.name in declared
            )
        return LoadoutChange(descriptions=descriptions, hidden=hidden)

    return AgentTool(
        name=text.CODEMODE,
        label=text.CODEMODE,
        # The same text for every session of a daemon: held once.
        description=shared(text.describe((), inline_budget=host.inline_budget)),
        parameters=PARAMETERS,
        execute=execute,
        prompt_snippet=text.SNIPPET,
        prompt_guidelines=text.GUIDELINES,
        exposure="model-only",
        prepare_loadout=prepare,
    )
