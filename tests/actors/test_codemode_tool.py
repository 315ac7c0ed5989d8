"""The codemode tool in a tool batch: nested calls, result layout, store, description."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import trio

from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.tool_executor import AgentTool, ToolBatch, run_tool_batch, text_result
from pitrio.actors.tool_executor.codemode import sandbox
from pitrio.actors.tool_executor.codemode.describe import describe, loadout_descriptions
from pitrio.actors.tool_executor.codemode.output import lay_out
from pitrio.actors.tool_executor.codemode.sandbox import OutputItem
from pitrio.actors.tool_executor.codemode.source import SourceError, parse_source
from pitrio.actors.tool_executor.codemode.tool import CodemodeHost, create_codemode_tool
from pitrio.actors.tool_executor.registry import ToolRegistry
from pitrio.actors.tool_executor.tools import create_builtin_tools
from pitrio.messages.agent import AgentToolResult, AssistantMessage, Usage
from pitrio.messages.content import ImageContent, TextContent, ToolCall, text_of
from pitrio.messages.entries import CustomEntry
from pitrio.messages.events import ToolExecutionEnd, ToolExecutionStart


def response(code: str) -> AssistantMessage:
    return AssistantMessage(
        content=(ToolCall(id="cm_1", name="codemode", arguments={"code": code}),),
        api="openai-completions",
        provider="faux",
        model="m",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=0,
    )


def mcp_like(gate: trio.Event | None = None) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        if gate is not None:
            gate.set()
        return AgentToolResult(
            content=(), details={}, structured_content={"zone": args.get("timezone")}
        )

    return AgentTool(
        name="mcp__time__get-time",
        description="Current time",
        parameters={"type": "object", "properties": {"timezone": {"type": "string"}}},
        execute=execute,
        exposure="codemode",
        namespace={"name": "mcp__time", "description": "Clocks"},
        output_schema={"type": "object"},
    )


async def run(code: str, tools: tuple[AgentTool, ...], host: CodemodeHost | None = None) -> Any:
    codemode = create_codemode_tool(host)
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    batch = ToolBatch(
        assistant_message=response(code),
        tools=(codemode, *[t for t in tools if t.exposure == "direct"]),
        callable_tools=(codemode, *tools),
    )
    result = await run_tool_batch(batch, emit=emit)
    return result.messages[0], events


async def test_a_script_calls_tools_together_and_reports_them(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello there")
    builtins = tuple(create_builtin_tools(str(tmp_path)))
    message, events = await run(
        "const [a, b] = await Promise.all([\n"
        "  tools.mcp__time__get_time({timezone: 'UTC'}),\n"
        "  tools.read({path: 'hello.txt'}),\n"
        "]);\n"
        "console.log('two calls');\n"
        "return {a, b}",
        (*builtins, mcp_like()),
    )
    text = text_of(message.content)
    assert not message.is_error, text
    assert re.match(r"Script completed\nWall time \d+\.\d seconds\nOutput:\n", text)
    assert text.endswith(
        '{"a":{"zone":"UTC"},"b":"hello there"}\n<console_output>\ntwo calls\n</console_output>'
    ) or text.endswith(
        '<console_output>\ntwo calls\n</console_output>\n{"a":{"zone":"UTC"},"b":"hello there"}'
    )
    calls = message.details["calls"]
    assert sorted((c["id"], c["name"], c["status"]) for c in calls) == [
        ("cm_1/1", "mcp__time__get-time", "ok"),
        ("cm_1/2", "read", "ok"),
    ] or sorted((c["id"], c["name"], c["status"]) for c in calls) == [
        ("cm_1/1", "read", "ok"),
        ("cm_1/2", "mcp__time__get-time", "ok"),
    ]
    nested = message.nested_calls
    assert nested is not None and nested.complete and len(nested.calls) == 2
    starts = [e for e in events if isinstance(e, ToolExecutionStart)]
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert [e.parent_tool_call_id for e in starts] == [None, "cm_1", "cm_1"]
    assert ends[-1].tool_call_id == "cm_1" and ends[-1].parent_tool_call_id is None


async def test_a_failed_script_keeps_its_output_and_names_the_calls_made() -> None:
    async def boom(call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        raise RuntimeError("disk on fire")

    broken = AgentTool(name="broken", execute=boom, exposure="codemode")
    message, _ = await run(
        "text('partial');\nawait tools.broken({});\ntext('never')", (broken, mcp_like())
    )
    assert message.is_error
    text = text_of(message.content)
    assert "Output:\npartial\nScript error:\nError: disk on fire" in text
    assert text.endswith("Tool calls made before the failure (they are not undone): broken (error)")
    assert message.details["calls"][0]["error"] == "disk on fire"


async def test_unknown_tools_and_bad_options_fail_clearly() -> None:
    message, _ = await run("await tools.nope({})", (mcp_like(),))
    assert "TypeError: tools.nope does not exist." in text_of(message.content)
    assert "No tool calls were made." in text_of(message.content)
    message, _ = await run('x\n// @options: {"timeout_ms": 5}\n', ())
    assert message.is_error
    assert text_of(message.content) == (
        "The // @options: line must be the first line of the input; found one on line 2"
    )


async def test_store_values_survive_between_scripts_on_the_branch() -> None:
    entries: list[Any] = []

    async def branch() -> list[Any]:
        return list(entries)

    async def append(custom_type: str, data: Any) -> None:
        entries.append(
            CustomEntry(custom_type=custom_type, data=data, id="e", parent_id=None, timestamp="t")
        )

    host = CodemodeHost(branch_entries=branch, append_entry=append)
    await run("store('cursor', {page: 2}); store('old', undefined)", (), host)
    assert [(e.custom_type, e.data) for e in entries] == [
        ("codemode-store", {"set": {"cursor": {"page": 2}}, "delete": ["old"]})
    ]
    message, _ = await run("return load('cursor').page + 1", (), host)
    assert text_of(message.content).endswith("Output:\n3")
    await run("store('x', 1); throw new Error('no')", (), host)
    assert len(entries) == 1  # a failed script's writes are dropped


async def test_the_description_lists_what_scripts_can_call_within_the_budget() -> None:
    async def nothing(call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        return text_result("")

    read = AgentTool(name="read", description="Read a file", execute=nothing)
    deferred = AgentTool(
        name="later", description="Loaded later", execute=nothing, exposure="deferred"
    )
    descriptions = loadout_descriptions((read,), (read, mcp_like(), deferred))
    listing = descriptions["codemode"]
    assert "## mcp__time\nClocks" in listing
    assert "### `mcp__time__get_time` (`mcp__time__get-time`)" in listing
    assert "tools.mcp__time__get_time(args: { timezone?: string }): Promise<{ }>" not in listing
    assert "later" not in listing and "### `read`" not in listing
    assert descriptions["read"].startswith("Read a file\n\nFrom codemode: `await tools.read(args)`")
    assert "(tools not listed)" in describe((mcp_like(),), inline_budget=0)


def test_the_options_line() -> None:
    source = parse_source('// @options: {"max_output_tokens": 20, "timeout_ms": 500}\nreturn 1')
    assert (source.code, source.max_output_tokens, source.timeout_ms) == ("\nreturn 1", 20, 500)
    for bad, message in [
        ("", "Expected JavaScript source text"),
        ('// @options: {"x": 1}\n1', "@options only supports"),
        ('// @options: {"timeout_ms": 0}\n1', "`timeout_ms` must be a positive integer"),
        ("// @options: {}", "must be followed by JavaScript source"),
    ]:
        try:
            parse_source(bad)
        except SourceError as exc:
            assert message in str(exc)
        else:
            raise AssertionError(bad)


async def test_abort_ends_the_script_with_its_calls_cancelled() -> None:
    entered = trio.Event()

    async def hang(call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    slow = AgentTool(name="slow", execute=hang, exposure="codemode")
    codemode = create_codemode_tool()
    abort = RunAbort()
    outcome: list[Any] = []

    async def emit(event: Any) -> None:
        pass

    async with trio.open_nursery() as nursery:

        async def go() -> None:
            batch = ToolBatch(
                assistant_message=response("text('before');\nawait tools.slow({})"),
                tools=(codemode,),
                callable_tools=(codemode, slow),
            )
            outcome.append(await run_tool_batch(batch, emit=emit, abort=abort))

        nursery.start_soon(go)
        await entered.wait()
        abort.abort()
    message = outcome[0].messages[0]
    assert message.is_error
    assert text_of(message.content).startswith("Script failed\nWall time ")
    assert "Output:\nbefore\nScript error:\n" in text_of(message.content)
    assert text_of(message.content).endswith(
        "Script aborted: This operation was aborted\n\n"
        "Tool calls made before the failure (they are not undone): slow (cancelled)"
    )
    assert message.details["calls"][0]["status"] == "cancelled"
    assert sandbox.worker_slots().active == 0


def test_long_output_keeps_its_ends_and_images_are_saved_before_they_show() -> None:
    saved: list[tuple[str, bytes]] = []

    def save(extension: str, data: bytes) -> str:
        saved.append((extension, data))
        return f"/tmp/out{len(saved)}{extension}"

    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
        "RU5ErkJggg=="
    )
    items = [
        OutputItem("text", "a" * 30 + "b" * 30),
        OutputItem("image", png, "image/png"),
        OutputItem("console", "logged"),
    ]
    laid = lay_out(items, ok=True, error=None, wall_seconds=0.04, max_output_tokens=10, save=save)
    head, body, image = laid.content  # the image's label joins the text before it
    assert head == TextContent(text="Script completed\nWall time 0.0 seconds\nOutput:\n")
    assert body.text.startswith("Warning: truncated output (original token count: 26)\n")
    assert "Total output lines: 4\n\n" + "a" * 20 + "…" in body.text
    assert body.text.endswith(
        "…ed\n</console_output>\n\n[Full output: /tmp/out1.txt (read with offset/limit)]\n"
        "[Image saved to /tmp/out2.png (image/png, 70B)]"
    )
    assert isinstance(image, ImageContent) and image.data == png
    assert laid.full_output_path == "/tmp/out1.txt"
    assert saved[0][1].decode().startswith("a" * 30)


def test_mode_only_lists_every_tool_and_leaves_out_their_declarations() -> None:
    builtins = create_builtin_tools("/tmp")
    registry = ToolRegistry()
    registry.register([*builtins, create_codemode_tool(CodemodeHost(mode="only"))], activate=False)
    registry.set_active(["read", "bash", "codemode"])
    declared = {tool.name: tool for tool in registry.active_tools()}
    assert list(declared) == ["codemode"]
    assert {"read", "bash"} <= {tool.name for tool in registry.callable_tools()}
    assert "### `read`" in declared["codemode"].description
    registry = ToolRegistry()
    registry.register([*builtins, create_codemode_tool()], activate=False)
    registry.set_active(["read", "codemode"])
    declared = {tool.name: tool for tool in registry.active_tools()}
    assert list(declared) == ["read", "codemode"]  # mode on: declared, with a note
    assert "### `read`" not in declared["codemode"].description


async def test_calls_still_running_when_the_script_ends_are_cancelled_and_ended() -> None:
    started, cancelled = trio.Event(), trio.Event()

    async def hang(call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    async def until_started(call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        # The script ends once `slow` runs: a call the script leaves running. (Returning right
        # after issuing it let the script end before the host had started it, now and then.)
        await started.wait()
        return AgentToolResult(content=(), details={})

    slow = AgentTool(name="slow", execute=hang, exposure="codemode")
    waiter = AgentTool(name="until_started", execute=until_started, exposure="codemode")
    message, events = await run(
        "tools.slow({});\nawait tools.until_started({});\nreturn 'left it running'",
        (slow, waiter),
    )
    assert cancelled.is_set()
    assert not message.is_error and text_of(message.content).endswith("left it running")
    statuses = {call["name"]: call["status"] for call in message.details["calls"]}
    assert statuses == {"slow": "cancelled", "until_started": "ok"}
    nested = message.nested_calls
    assert nested is not None
    assert sorted((c.name, c.status) for c in nested.calls) == [
        ("slow", "error"),
        ("until_started", "ok"),
    ]
    ends = [(e.tool_name, e.is_error) for e in events if isinstance(e, ToolExecutionEnd)]
    assert ends == [("until_started", False), ("slow", True), ("codemode", False)]
    # Nested ids are numbered as the host starts the calls: either order, both under cm_1.
    ids = sorted(e.tool_call_id for e in events if isinstance(e, ToolExecutionEnd))
    assert ids == ["cm_1", "cm_1/1", "cm_1/2"]


async def test_read_of_an_image_gives_an_image_block_that_image_shows(tmp_path: Path) -> None:
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
        "RU5ErkJggg=="
    )
    (tmp_path / "dot.png").write_bytes(base64.b64decode(png))
    builtins = tuple(create_builtin_tools(str(tmp_path)))
    message, _ = await run(
        "const shot = await tools.read({path: 'dot.png'});\n"
        "image(shot);\nreturn [shot.type, shot.mimeType, typeof shot.note]",
        builtins,
    )
    assert not message.is_error, text_of(message.content)
    images = [part for part in message.content if isinstance(part, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert text_of(message.content).endswith('["image","image/png","string"]')
    assert "[Image saved to " in text_of(message.content)


async def test_bash_gives_a_script_its_structured_result_even_for_a_failing_command(
    tmp_path: Path,
) -> None:
    builtins = tuple(create_builtin_tools(str(tmp_path)))
    assert {t.name for t in builtins if t.output_schema is not None} >= {"bash", "read"}
    message, _ = await run(
        "const ok = await tools.bash({command: 'echo hi'});\n"
        "const bad = await tools.bash({command: 'echo oops >&2; exit 3'});\n"
        "return [ok.output, ok.exit_code, ok.truncated, typeof ok.wall_time_seconds,"
        " bad.output, bad.exit_code, Object.keys(ok).sort()]",
        builtins,
    )
    text = text_of(message.content)
    assert not message.is_error, text
    assert text.endswith(
        '["hi\\n",0,false,"number","oops\\n",3,'
        '["exit_code","output","truncated","wall_time_seconds"]]'
    )
    # the failing call is still an error in the script's call list and the nested record
    assert [c["status"] for c in message.details["calls"]] == ["ok", "error"]
    assert message.nested_calls is not None
    assert [c.status for c in message.nested_calls.calls] == ["ok", "error"]


def test_scripts_are_told_what_bash_and_read_resolve_to(tmp_path: Path) -> None:
    builtins = tuple(create_builtin_tools(str(tmp_path)))
    listing = describe(builtins, inline_budget=None)
    assert (
        "tools.bash(args: { command: string; timeout?: number }): Promise<{ output: string; "
        "truncated: boolean; full_output_path?: string; exit_code: number; "
        "wall_time_seconds: number }>"
    ) in listing
    assert (
        'Promise<string | { type: "image"; data: string; mimeType: string; note: string }>'
        in listing
    )
