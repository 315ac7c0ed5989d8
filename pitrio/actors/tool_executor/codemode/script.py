"""One ``codemode`` call: the script run in the sandbox, its nested calls and its result.

Imported by the tool's first call (:mod:`.tool` registers the tool and describes it in every
session; the sandbox, the output's layout and the source's header are only needed to run a
script: issue 38, start-up time).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from pitrio.actors.tool_executor.codemode import describe as text
from pitrio.actors.tool_executor.codemode.host import CodemodeHost
from pitrio.actors.tool_executor.codemode.output import error_text, lay_out, value_text
from pitrio.actors.tool_executor.codemode.sandbox import (
    HostCallError,
    OutputItem,
    ScriptError,
    run_script,
)
from pitrio.actors.tool_executor.codemode.source import parse_source
from pitrio.actors.tool_executor.context import ToolCallContext, current_call
from pitrio.actors.tool_executor.tool import UpdateFn
from pitrio.actors.tool_executor.tools.output_files import write_output_file
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent

STORE_ENTRY_TYPE = "codemode-store"
ARGS_PREVIEW_CHARS = 200
ERROR_PREVIEW_CHARS = 500
DEFAULT_SEARCH_LIMIT = 8
ABORTED = "This operation was aborted"
"""Why an aborted script failed: the text of the abort 1.6.0's scripts see."""


def read_store(entries: Sequence[Any]) -> dict[str, Any]:
    """The values ``load()`` sees: the branch's ``codemode-store`` entries, root first."""
    values: dict[str, Any] = {}
    for entry in entries:
        if getattr(entry, "type", None) != "custom":
            continue
        if getattr(entry, "custom_type", None) != STORE_ENTRY_TYPE:
            continue
        data = entry.data
        if not isinstance(data, dict):
            continue
        kept, deleted = data.get("set"), data.get("delete")
        if not isinstance(kept, dict) or not isinstance(deleted, list):
            continue
        if not all(isinstance(key, str) for key in deleted):
            continue
        for key in deleted:
            values.pop(key, None)
        values.update(kept)
    return values


def _truncate(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _text(result: AgentToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


def _namespace_matches(space: Mapping[str, Any] | None, query: str) -> bool:
    if not space:
        return False
    names = [space.get("name"), *(space.get("aliases") or ())]
    wanted = text.identifier(query)
    return any(
        isinstance(name, str) and (name == query or text.identifier(name) == wanted)
        for name in names
    )


class _Script:
    """One codemode call: its nested calls' records and the answers to its host calls."""

    def __init__(
        self,
        ctx: ToolCallContext,
        host: CodemodeHost,
        on_update: UpdateFn,
        max_output_tokens: int | None,
    ) -> None:
        self.ctx = ctx
        self.max_output_tokens = max_output_tokens
        self.host = host
        self.on_update = on_update
        self.calls: list[dict[str, Any]] = []
        self.output: list[OutputItem] = []
        """What the script has output so far (the sandbox appends to it)."""
        ctx.set_aborted_result(self.aborted)
        self.started = trio.current_time()
        self.tools = [t for t in ctx.callable_tools if t.name != text.CODEMODE]
        self.by_name = {tool.name: tool for tool in self.tools}
        self.samples = {
            tool.name: text.declaration(tool, tool.prompt_guidelines) for tool in self.tools
        }

    def details(self) -> dict[str, Any]:
        return {"calls": [dict(call) for call in self.calls]}

    async def publish(self) -> None:
        await self.on_update(AgentToolResult(content=(), details=self.details()))

    def aborted(self) -> AgentToolResult:
        """The result of a script an abort ended: its output so far, its calls cancelled."""
        for call in self.calls:
            if call["status"] == "running":
                call["status"] = "cancelled"
        return self.result(False, self.output, ScriptError("aborted", ABORTED))

    def result(
        self,
        ok: bool,
        output: Sequence[OutputItem],
        error: ScriptError | None,
        wall_seconds: float | None = None,
    ) -> AgentToolResult:
        """The result content and details (writes the output files: off the event loop when
        ``wall_seconds`` is given, as it must be there)."""
        if wall_seconds is None:
            wall_seconds = trio.current_time() - self.started
        laid = lay_out(
            output,
            ok=ok,
            error=None if error is None else error_text(error, self.calls),
            wall_seconds=wall_seconds,
            max_output_tokens=self.max_output_tokens,
            save=lambda extension, data: write_output_file("pi-codemode", extension, data),
        )
        details = self.details()
        if laid.full_output_path is not None:
            details["fullOutputPath"] = laid.full_output_path
        return AgentToolResult(content=laid.content, details=details, is_error=not ok)

    async def call_tool(self, name: str, args: Any) -> Any:
        tool = self.by_name.get(name)
        if tool is None:
            raise HostCallError(f'Unknown tool "{name}"')
        record: dict[str, Any] = {
            "id": f"{self.ctx.tool_call_id}/?",
            "name": name,
            "args": _preview(args),
            "status": "running",
        }
        self.calls.append(record)
        await self.publish()
        began = trio.current_time()
        arguments = args if isinstance(args, dict) else {}
        outcome = await self.ctx.execute_tool(name, arguments)
        record["id"] = outcome.tool_call_id
        record["durationMs"] = round((trio.current_time() - began) * 1000, 3)
        if outcome.is_error:
            record["status"] = "error"
            failure = _text(outcome.result) or f'Tool "{name}" failed'
            record["error"] = _truncate(failure, ERROR_PREVIEW_CHARS)
        else:
            record["status"] = "ok"
        await self.publish()
        structured = outcome.result.structured_content
        if tool.output_schema is not None and structured is not None:
            return structured
        content = _text(outcome.result)
        if outcome.is_error:
            raise HostCallError(content or f'Tool "{name}" failed')
        return content

    async def call_global(self, name: str, args: Any) -> Any:
        values = args if isinstance(args, list) else []
        if name == "searchTools":
            return self.search_tools(values)
        first = values[0] if values else None
        if name == "describeTool":
            if not isinstance(first, str):
                raise HostCallError("describeTool() expects a tool name")
            for tool in self.tools:
                if first in (tool.name, text.identifier(tool.name)):
                    return self.samples[tool.name]
            return None
        if name == "describeNamespace":
            if not isinstance(first, str):
                raise HostCallError("describeNamespace() expects a namespace name")
            return self.describe_namespace(first)
        raise HostCallError(f'Unknown global "{name}"')

    def search_tools(self, values: list[Any]) -> list[dict[str, str]]:
        query = values[0] if values else None
        options = values[1] if len(values) > 1 and isinstance(values[1], dict) else {}
        if not isinstance(query, str):
            raise HostCallError("searchTools() expects a query string")
        limit = options.get("limit", DEFAULT_SEARCH_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise HostCallError("searchTools() limit must be a positive integer")
        space = options.get("namespace")
        if space is not None and not isinstance(space, str):
            raise HostCallError("searchTools() namespace must be a string")
        pool = [t for t in self.tools if not space or _namespace_matches(t.namespace, space)]
        names = self.host.search(query, pool, limit) if self.host.search else []
        return [
            {"name": text.identifier(name), "description": self.samples.get(name, "")}
            for name in names
        ]

    def describe_namespace(self, query: str) -> dict[str, Any] | None:
        found: Mapping[str, Any] | None = None
        members: list[str] = []
        for tool in self.tools:
            if _namespace_matches(tool.namespace, query):
                found = found or tool.namespace
                members.append(text.identifier(tool.name))
        if found is None:
            return None
        answer: dict[str, Any] = {"name": found["name"]}
        for key in ("description", "instructions"):
            if found.get(key):
                answer[key] = found[key]
        answer["tools"] = members
        return answer


def _preview(args: Any) -> str:
    if args is None:
        return ""
    try:
        return _truncate(
            json.dumps(args, ensure_ascii=False, separators=(",", ":")), ARGS_PREVIEW_CHARS
        )
    except (TypeError, ValueError):
        return ""


GLOBALS = [
    {"name": "searchTools", "spread": True},
    {"name": "describeTool", "spread": True},
    {"name": "describeNamespace", "spread": True},
]


async def run_call(
    host: CodemodeHost, args: dict[str, Any], on_update: UpdateFn
) -> AgentToolResult:
    """Run one call's script (the tool's ``execute``): its result, or its failure as one."""
    source = parse_source(str(args.get("code", "")))
    ctx = current_call()
    if ctx is None:
        raise ToolError("codemode runs only inside a tool batch")
    if host.reach is not None:  # servers connecting in the background
        ctx.reach(await host.reach(source.code))
    script = _Script(ctx, host, on_update, source.max_output_tokens)
    await script.publish()
    stored: dict[str, Any] = {}
    if host.branch_entries is not None:
        stored = read_store(await host.branch_entries())
    result = await run_script(
        source.code,
        tools=[
            {
                "name": t.name,
                "jsName": text.identifier(t.name),
                "description": script.samples[t.name],
            }
            for t in script.tools
        ],
        globals_=GLOBALS,
        store={key: json.dumps(value, ensure_ascii=False) for key, value in stored.items()},
        call_tool=script.call_tool,
        call_global=script.call_global,
        timeout_ms=source.timeout_ms,
        output=script.output,
    )
    if result.error is not None and result.error.kind == "busy":
        return _not_started(script, result.error.message)
    for call in script.calls:
        if call["status"] == "running":
            call["status"] = "cancelled"
    output = list(result.output)
    if result.ok:
        if result.writes and host.append_entry is not None:
            kept = {key: json.loads(raw) for key, raw in result.writes if raw is not None}
            gone = [key for key, raw in result.writes if raw is None]
            await host.append_entry(STORE_ENTRY_TYPE, {"set": kept, "delete": gone})
        if result.has_value:
            raw = json.dumps(result.value, ensure_ascii=False, separators=(",", ":"))
            output.append(OutputItem("text", value_text(result.value, raw)))
    wall = trio.current_time() - script.started
    # Cutting a long output and saving images writes files: off the event loop.
    return await trio.to_thread.run_sync(script.result, result.ok, output, result.error, wall)


def _not_started(script: _Script, message: str) -> AgentToolResult:
    waited = trio.current_time() - script.started
    return AgentToolResult(
        content=(
            TextContent(text=f"Script failed\nWall time {waited:.1f} seconds\nOutput:\n"),
            TextContent(text=f"Script error:\n{message}\n\nThe script did not start."),
        ),
        details=script.details(),
        is_error=True,
    )
