"""The extension runner's return contracts (spec §7.3; scenarios S206-S214) and the registry's
naming rules, on hand-made extensions."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.session.extensions.events import (
    BeforeCompactResult,
    CancelResult,
    InputResult,
    ToolResultEvent,
)
from pitrio.actors.session.extensions.registry import (
    Command,
    Extension,
    SourceInfo,
    invocation_names,
    tool_conflicts,
)
from pitrio.actors.session.extensions.runner import (
    ExtensionRunner,
    ToolCallBlockedError,
    coerce,
)
from pitrio.actors.tool_executor import AgentTool, text_result
from pitrio.messages.agent import UserMessage, user_message
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.events import ExtensionError, MessageEnd


def ext(name: str, **handlers: Any) -> Extension:
    extension = Extension(
        path=f"/x/{name}.py",
        source_info=SourceInfo(path=f"/x/{name}.py", source="cli", scope="temporary"),
    )
    for event, handler in handlers.items():
        extension.handlers[event] = handler if isinstance(handler, list) else [handler]
    return extension


def runner_of(*extensions: Extension, timeout: float = 30.0) -> tuple[ExtensionRunner, list]:
    errors: list[ExtensionError] = []
    runner = ExtensionRunner(extensions, handler_timeout=timeout)
    runner.bind(report=errors.append, context=lambda: "ctx")
    return runner, errors


IMAGE = ImageContent(data="AAAA", mime_type="image/png")


async def test_input_without_handlers_or_with_continue_is_continue() -> None:  # S206
    runner, _ = runner_of()
    assert (await runner.input("hi", (), "rpc")).action == "continue"
    runner, _ = runner_of(ext("a", input=[lambda e, c: None, lambda e, c: {"action": "continue"}]))
    result = await runner.input("hi", (IMAGE,), "rpc")
    assert result.action == "continue" and result.text == "hi" and result.images == (IMAGE,)


async def test_transform_keeps_images_unless_it_returns_some() -> None:  # S207
    keep, _ = runner_of(ext("a", input=lambda e, c: {"action": "transform", "text": "X"}))
    result = await keep.input("hi", (IMAGE,), "rpc")
    assert (result.action, result.text, result.images) == ("transform", "X", (IMAGE,))
    other = ImageContent(data="BBBB", mime_type="image/jpeg")
    swap, _ = runner_of(
        ext("a", input=lambda e, c: InputResult(action="transform", text="Y", images=(other,)))
    )
    assert (await swap.input("hi", (IMAGE,), "rpc")).images == (other,)


async def test_transforms_chain_in_load_order() -> None:  # S208
    def add(mark: str) -> Any:
        return lambda e, c: {"action": "transform", "text": f"{e.text}[{mark}]"}

    runner, _ = runner_of(ext("a", input=add("1")), ext("b", input=add("2")))
    assert (await runner.input("X", (), "rpc")).text == "X[1][2]"


async def test_handled_short_circuits() -> None:  # S209
    seen: list[str] = []

    def later(event: Any, ctx: Any) -> None:
        seen.append("later")

    runner, _ = runner_of(ext("a", input=lambda e, c: {"action": "handled"}), ext("b", input=later))
    assert (await runner.input("X", (), "rpc")).action == "handled"
    assert seen == []


async def test_sources_reach_handlers_and_a_raising_handler_is_reported() -> None:  # S210
    sources: list[str] = []

    def record(event: Any, ctx: Any) -> None:
        sources.append(event.source)

    def boom(event: Any, ctx: Any) -> None:
        raise RuntimeError("boom")

    runner, errors = runner_of(ext("a", input=[record, boom]))
    for source in ("interactive", "rpc", "extension"):
        assert (await runner.input("x", (), source)).action == "continue"  # type: ignore[arg-type]
    assert sources == ["interactive", "rpc", "extension"]
    assert errors[0] == ExtensionError(extension_path="/x/a.py", event="input", error="boom")
    assert runner.has("input") and not runner.has("context")


def test_first_tool_registration_wins() -> None:  # S211
    def tool(name: str, label: str) -> AgentTool:
        async def run(call_id: str, args: dict[str, Any], on_update: Any) -> Any:
            return text_result(label)

        return AgentTool(name=name, label=label, execute=run)

    a, b = ext("a"), ext("b")
    a.tools += [tool("same", "first"), tool("only_a", "a")]
    b.tools += [tool("same", "second"), tool("only_b", "b")]
    chosen, problems = tool_conflicts([a, b])
    assert [(t.name, t.label) for t in chosen] == [
        ("same", "first"),
        ("only_a", "a"),
        ("only_b", "b"),
    ]
    assert len(problems) == 1 and "'same'" in problems[0]


def test_commands_collide_into_suffixes_and_reserved_names_are_dropped() -> None:  # S212
    a, b = ext("a"), ext("b")

    def handler(args: str, ctx: Any) -> None:
        return None

    for extension, names in ((a, ["stats", "compact", "solo"]), (b, ["stats"])):
        for name in names:
            extension.commands.append(
                Command(name=name, description=None, handler=handler, extension=extension)
            )
    named, problems = invocation_names([a, b])
    assert [name for name, _ in named] == ["stats:1", "solo", "stats:2"]
    assert named[2][1].extension is b
    assert any("/compact" in problem for problem in problems)
    runner, _ = runner_of(a, b)
    assert runner.command("solo") is not None and runner.command("nope") is None


async def test_a_raising_notification_handler_is_reported_and_others_run() -> None:  # S213
    seen: list[str] = []

    async def fails(event: Any, ctx: Any) -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("bad handler")

    runner, errors = runner_of(
        ext("a", agent_start=fails), ext("b", agent_start=lambda e, c: seen.append(c))
    )
    await runner.notify("agent_start", object())
    assert [e.error for e in errors] == ["bad handler"] and seen == ["ctx"]


async def test_tool_result_patches_chain() -> None:  # S214
    def first(event: ToolResultEvent, ctx: Any) -> Any:
        return {"content": [*event.content, TextContent(text="+ext1")], "details": {"a": 1}}

    def second(event: ToolResultEvent, ctx: Any) -> Any:
        return {"content": [*event.content, TextContent(text="+ext2")]}

    def third(event: ToolResultEvent, ctx: Any) -> Any:
        return {"isError": True}

    runner, _ = runner_of(ext("a", tool_result=first), ext("b", tool_result=[second, third]))
    base = ToolResultEvent(
        tool_name="read",
        tool_call_id="c1",
        input={},
        content=(TextContent(text="base"),),
        details=None,
        is_error=False,
    )
    out = await runner.tool_result(base)
    assert [block.text for block in out.content] == ["base", "+ext1", "+ext2"]
    assert out.details == {"a": 1} and out.is_error is True


async def test_tool_call_first_block_wins_and_a_raise_blocks() -> None:
    calls: list[str] = []

    def allow(event: Any, ctx: Any) -> Any:
        calls.append("allow")
        event.input["path"] = "rewritten"  # mutable in place
        return {"block": False}

    def block(event: Any, ctx: Any) -> Any:
        calls.append("block")
        return {"block": True, "reason": "no"}

    def never(event: Any, ctx: Any) -> Any:
        calls.append("never")

    runner, _ = runner_of(ext("a", tool_call=[allow, block]), ext("b", tool_call=never))
    args = {"path": "x"}
    result = await runner.tool_call("read", "c1", args)
    assert result is not None and result.block and result.reason == "no"
    assert calls == ["allow", "block"] and args["path"] == "rewritten"

    def raises(event: Any, ctx: Any) -> Any:
        raise PermissionError("denied by policy")

    failing, errors = runner_of(ext("a", tool_call=raises))
    with pytest.raises(ToolCallBlockedError, match="denied by policy"):
        await failing.tool_call("bash", "c2", {})
    assert errors[0].event == "tool_call"


async def test_message_end_replacement_must_keep_the_role() -> None:
    original = user_message("hello")
    replacement = user_message("HELLO")

    def wrong_role(event: Any, ctx: Any) -> Any:
        from pitrio.messages.agent import CustomMessage

        return {"message": CustomMessage(custom_type="x", content="y", display=True, timestamp=1)}

    runner, errors = runner_of(
        ext("a", message_end=wrong_role),
        ext("b", message_end=lambda e, c: {"message": replacement}),
    )
    out = await runner.message_end(original, MessageEnd(message=original))
    assert out is replacement and isinstance(out, UserMessage)
    assert len(errors) == 1 and "role" in errors[0].error and errors[0].extension_path == "/x/a.py"


async def test_before_events_first_cancel_wins_else_last_result() -> None:
    seen: list[str] = []

    def cancel(event: Any, ctx: Any) -> Any:
        seen.append("cancel")
        return CancelResult(cancel=True)

    runner, _ = runner_of(
        ext("a", session_before_switch=[lambda e, c: {}, cancel]),
        ext("b", session_before_switch=lambda e, c: seen.append("b")),
    )
    result = await runner.before("session_before_switch", object(), CancelResult)
    assert result is not None and result.cancel and seen == ["cancel"]
    compaction = {"compaction": {"summary": "S", "firstKeptEntryId": "e1", "tokensBefore": 999}}
    supplies, _ = runner_of(ext("a", session_before_compact=lambda e, c: compaction))
    got = await supplies.before("session_before_compact", object(), BeforeCompactResult)
    assert got is not None and got.compaction is not None
    assert (got.compaction.summary, got.compaction.tokens_before) == ("S", 999)


async def test_a_handler_that_never_returns_is_abandoned_after_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def hangs(event: Any, ctx: Any) -> None:
        await trio.sleep_forever()

    runner, errors = runner_of(
        ext("a", input=[hangs, lambda e, c: {"action": "transform", "text": "after"}]),
        timeout=5.0,
    )
    start = trio.current_time()
    result = await runner.input("x", (), "rpc")
    assert result.text == "after"  # the session goes on with the next handler
    assert trio.current_time() - start == pytest.approx(5.0)
    assert "within 5 s" in errors[0].error


def test_coerce_names_what_it_expected() -> None:
    with pytest.raises(TypeError, match="expected InputResult"):
        coerce(42, InputResult)
    assert coerce({"action": "handled"}, InputResult) == InputResult(action="handled")
