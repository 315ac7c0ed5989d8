"""Extensions inside a running session: commands, input, before_agent_start, tool hooks,
message replacement, notifications, dialogs, the API, and discovery on real directories."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import pitrio
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.session.extensions import (
    ExtensionLoadError,
    discover_extensions,
)
from pitrio.actors.tool_executor import AgentTool, text_result
from pitrio.errors import PitrioError
from pitrio.messages.agent import (
    AssistantMessage,
    CustomMessage,
    ToolResultMessage,
    UserMessage,
    user_message,
)
from pitrio.messages.content import TextContent, text_of
from pitrio.messages.entries import CustomEntry, LabelEntry, MessageEntry
from pitrio.messages.events import (
    AgentSessionEvent,
    AgentStart,
    ExtensionError,
    ExtensionUiRequest,
    MessageEnd,
)
from tests.actors import extension_probe
from tests.stray_cancel import no_stray_cancel


@attrs.define
class Harness:
    session: pitrio.AgentSession
    faux: FauxProvider
    events: trio.MemoryReceiveChannel[Any]
    seen: list[AgentSessionEvent] = attrs.field(factory=list)

    async def drain(self) -> list[AgentSessionEvent]:
        while True:
            await trio.testing.wait_all_tasks_blocked()
            try:
                self.seen.append(self.events.receive_nowait().event)
            except trio.WouldBlock:
                return self.seen

    async def next_of(self, kind: type[Any]) -> Any:
        with trio.fail_after(5):
            while True:
                event = (await self.events.receive()).event
                self.seen.append(event)
                if isinstance(event, kind):
                    return event


@pytest.fixture
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    return agent


@asynccontextmanager
async def session_with(
    tmp_path: Path,
    setup: Any,
    *,
    replies: tuple[Any, ...] = (),
    ui: bool = True,
    settings: str | None = None,
    **options: Any,
) -> AsyncIterator[Harness]:
    extension_probe.setup = setup
    path = extension_probe.write_bridge(tmp_path / "exts")
    if settings is not None:
        (Path(str(tmp_path / "agent")) / "settings.json").write_text(settings)
    faux = FauxProvider(replies)
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"),
        model="faux/faux-1",
        faux=faux,
        session_dir=str(tmp_path / "sessions"),
        extensions=[str(path)],
        ui_clients=ui,
        **options,
    ) as session:
        events = await session.subscribe()
        with no_stray_cancel():
            yield Harness(session, faux, events)


async def test_a_command_runs_instead_of_a_prompt_and_is_listed_first(
    tmp_path: Path, agent_dir: Path
) -> None:
    calls: list[str] = []

    def setup(api: Any) -> None:
        async def hello(args: str, ctx: Any) -> None:
            await trio.lowlevel.checkpoint()
            calls.append(args)

        api.register_command("hello", hello, description="Say hello")

    prompts = tmp_path / "proj" / ".pitrio" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "review.md").write_text("Review $1")
    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("/hello big world")
        commands = await h.session.handle.commands()
        events = await h.drain()
    assert calls == ["big world"]
    assert not any(isinstance(e, AgentStart) for e in events)  # the agent did not run
    assert h.faux.requests == []
    assert [c["name"] for c in commands] == ["hello", "review"]
    assert commands[0]["source"] == "extension" and commands[0]["description"] == "Say hello"
    assert commands[0]["sourceInfo"]["scope"] == "temporary"


async def test_a_failing_command_is_reported_and_steering_a_command_is_refused(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        def boom(args: str, ctx: Any) -> None:
            raise RuntimeError("boom!")

        api.register_command("boom", boom)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("/boom")
        error = await h.next_of(ExtensionError)
        with pytest.raises(PitrioError, match='Extension command "/boom" cannot be queued'):
            await h.session.steer("/boom now")
    assert error == ExtensionError(extension_path="command:boom", event="command", error="boom!")


async def test_input_transforms_and_handles(tmp_path: Path, agent_dir: Path) -> None:
    def setup(api: Any) -> None:
        def on_input(event: Any, ctx: Any) -> Any:
            if event.text == "skip":
                return {"action": "handled"}
            return {"action": "transform", "text": event.text.upper()}

        api.on("input", on_input)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("skip")
        assert h.faux.requests == []
        await h.session.prompt("shout")
        sent = h.faux.last_request.context.messages
    assert [text_of(m.content) for m in sent if isinstance(m, UserMessage)] == ["SHOUT"]


async def test_steer_and_follow_up_pass_through_input_handlers(
    tmp_path: Path, agent_dir: Path
) -> None:
    """pi 1.6.0 runs ``input`` handlers on queued text too: handled is not queued."""
    sources: list[str] = []

    def setup(api: Any) -> None:
        def on_input(event: Any, ctx: Any) -> Any:
            sources.append(event.source)
            if event.text == "skip":
                return {"action": "handled"}
            return {"action": "transform", "text": event.text.upper()}

        api.on("input", on_input)

    async with session_with(tmp_path, setup) as h:
        handle = h.session.handle
        assert await handle.steer("skip", source="rpc") is None
        assert await handle.follow_up("skip") is None
        assert await handle.steer("turn") is not None
        assert await handle.follow_up("later", source="rpc") is not None
        state = await handle.state()
    assert (state.steering, state.follow_up) == (("TURN",), ("LATER",))
    assert sources == ["rpc", "interactive", "interactive", "rpc"]


async def test_before_agent_start_adds_a_message_and_a_system_prompt_for_one_run(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        def before(event: Any, ctx: Any) -> Any:
            if event.prompt != "first":
                return None
            return {
                "message": {"customType": "note", "content": "extra context"},
                "systemPrompt": event.system_prompt + "\nBE BRIEF",
            }

        api.on("before_agent_start", before)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("first")
        first = h.faux.last_request.context
        await h.session.prompt("second")
        second = h.faux.last_request.context
    assert first.system_prompt.endswith("\nBE BRIEF")
    assert not second.system_prompt.endswith("BE BRIEF")  # back to the base prompt
    assert second.system_prompt == first.system_prompt[: -len("\nBE BRIEF")]
    texts = [text_of(m.content) for m in first.messages]
    assert texts[:2] == ["first", "extra context"]


def _tool_reply(name: str, arguments: dict[str, Any]) -> FauxReply:
    return FauxReply(tool_calls=(FauxToolCall(name, arguments),))


def _echo_tool() -> AgentTool:
    async def run(call_id: str, args: dict[str, Any], on_update: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return text_result(f"echo {args.get('text')}")

    return AgentTool(
        name="echo",
        label="Echo",
        description="Echo text",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        execute=run,
    )


async def test_tool_call_sees_the_persisted_turn_and_can_block(
    tmp_path: Path, agent_dir: Path
) -> None:
    persisted: list[list[str]] = []

    def setup(api: Any) -> None:
        api.register_tool(_echo_tool())

        async def gate(event: Any, ctx: Any) -> Any:
            branch = await ctx.session_manager.branch()
            persisted.append([e.message.role for e in branch if isinstance(e, MessageEntry)])
            if event.input.get("text") == "rm":
                return {"block": True, "reason": "not allowed"}
            event.input["text"] = "changed"
            return None

        api.on("tool_call", gate)

    replies = (
        _tool_reply("echo", {"text": "rm"}),
        _tool_reply("echo", {"text": "ok"}),
        FauxReply(text="done"),
    )
    async with session_with(tmp_path, setup, replies=replies) as h:
        await h.session.prompt("go")
        messages = await h.session.messages()
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and text_of(results[0].content) == "not allowed"
    assert not results[1].is_error and text_of(results[1].content) == "echo changed"
    # S35: at hook time the file already held the turn's user and assistant messages (after
    # the session's leading system message, pi 1.6.0).
    assert persisted[0] == ["system", "user", "assistant"]
    assert persisted[1] == ["system", "user", "assistant", "toolResult", "assistant"]


async def test_abort_cancels_a_hook_handler_and_returns_once_it_unwound(
    tmp_path: Path, agent_dir: Path
) -> None:
    # Handlers run in the extension host's tasks: an abort reaching the loop's hook must still
    # cancel the handler it awaits (here waiting for a dialog) and let it unwind first.
    trail: list[str] = []

    def setup(api: Any) -> None:
        api.register_tool(_echo_tool())

        async def gate(event: Any, ctx: Any) -> Any:
            try:
                await ctx.ui.confirm("Run it?", event.tool_name)
            except trio.Cancelled:
                trail.append("cancelled")
                raise
            finally:
                with trio.CancelScope(shield=True):
                    await trio.lowlevel.checkpoint()
                    trail.append("unwound")
            return None

        api.on("tool_call", gate)

    replies = (_tool_reply("echo", {"text": "x"}), FauxReply(text="never"))
    async with session_with(tmp_path, setup, replies=replies) as h:
        await h.session.handle.submit("go")
        await h.next_of(ExtensionUiRequest)
        with trio.fail_after(5):
            await h.session.handle.abort()
        assert trail == ["cancelled", "unwound"]  # before abort returned
        messages = await h.session.messages()
    results = [text_of(m.content) for m in messages if isinstance(m, ToolResultMessage)]
    assert "echo x" not in results, results  # the tool never ran
    assert len(h.faux.requests) == 1


async def test_tool_result_patch_and_message_end_replacement_are_persisted(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        api.register_tool(_echo_tool())
        api.on(
            "tool_result",
            lambda e, c: {"content": [TextContent(text=text_of(e.content) + " [checked]")]},
        )

        def redact(event: Any, ctx: Any) -> Any:
            message = event.message
            if isinstance(message, AssistantMessage) and text_of(message.content) == "secret":
                blocks = (TextContent(text="[redacted]"),)
                return {"message": attrs.evolve(message, content=blocks)}
            if isinstance(message, UserMessage) and text_of(message.content) == "swap":
                return {
                    "message": CustomMessage(
                        custom_type="x", content="y", display=True, timestamp=1
                    )
                }
            return None

        api.on("message_end", redact)

    replies = (_tool_reply("echo", {"text": "a"}), FauxReply(text="secret"))
    async with session_with(tmp_path, setup, replies=replies) as h:
        await h.session.prompt("go")
        await h.session.prompt("swap")
        messages = await h.session.messages()
        entries = await h.session.store.entries()
        events = await h.drain()
    tool_result = next(m for m in messages if isinstance(m, ToolResultMessage))
    assert text_of(tool_result.content) == "echo a [checked]"
    assistants = [m for m in messages if isinstance(m, AssistantMessage)]
    assert text_of(assistants[1].content) == "[redacted]"  # the loop's transcript
    stored = [e.message for e in entries if isinstance(e, MessageEntry)]
    assert any(
        isinstance(m, AssistantMessage) and text_of(m.content) == "[redacted]" for m in stored
    )
    assert not any(
        isinstance(m, AssistantMessage) and text_of(m.content) == "secret" for m in stored
    )
    ends = [e.message for e in events if isinstance(e, MessageEnd)]
    assert any(isinstance(m, AssistantMessage) and text_of(m.content) == "[redacted]" for m in ends)
    # A replacement of another role is refused, reported, and the user message kept.
    assert any(isinstance(m, UserMessage) and text_of(m.content) == "swap" for m in stored)
    errors = [e for e in events if isinstance(e, ExtensionError)]
    assert len(errors) == 1 and "role" in errors[0].error


async def test_dialogs_go_to_clients_and_time_out_to_defaults(
    tmp_path: Path, agent_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    answers: list[Any] = []

    def setup(api: Any) -> None:
        async def ask(args: str, ctx: Any) -> None:
            answers.append(ctx.has_ui)
            answers.append(await ctx.ui.select("Pick", ["a", "b"]))
            answers.append(await ctx.ui.confirm("Sure?", "really", time_limit=2.0))
            await ctx.ui.notify("done", "info")

        api.register_command("ask", ask)

    async with session_with(tmp_path, setup) as h:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.session.prompt, "/ask")
            select = await h.next_of(ExtensionUiRequest)
            assert (select.method, select.options, select.timeout) == ("select", ("a", "b"), None)
            state = await h.session.handle.state()  # other commands are answered meanwhile
            assert not state.is_running
            await h.session.respond_ui("unknown-id", value="a")  # ignored
            await h.session.respond_ui(select.id, value="b")
            confirm = await h.next_of(ExtensionUiRequest)
            assert (confirm.method, confirm.timeout) == ("confirm", 2000)
            notify = await h.next_of(ExtensionUiRequest)  # after the 2 s timeout
            await h.session.respond_ui(confirm.id, confirmed=True)  # late: ignored
        assert notify.method == "notify" and notify.message == "done"
    assert answers == [True, "b", False]


async def test_without_clients_dialogs_return_defaults_at_once(
    tmp_path: Path, agent_dir: Path
) -> None:
    answers: list[Any] = []

    def setup(api: Any) -> None:
        async def ask(args: str, ctx: Any) -> None:
            answers.extend([ctx.has_ui, await ctx.ui.select("Pick", ["a"])])
            answers.append(await ctx.ui.confirm("Sure?", "x"))

        api.register_command("ask", ask)

    async with session_with(tmp_path, setup, ui=False) as h:
        await h.session.prompt("/ask")
        events = await h.drain()
    assert answers == [False, None, False]
    assert not any(isinstance(e, ExtensionUiRequest) for e in events)


async def test_the_api_records_entries_labels_names_and_messages(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        async def note(args: str, ctx: Any) -> None:
            entry_id = await api.append_entry("state", {"n": 1})
            await api.set_label(entry_id, "bookmark")
            await api.set_session_name("named by extension")
            api.send_message("hint", "remember this", deliver_as="nextTurn")
            assert await api.get_session_name() == "named by extension"
            assert "read" in await api.get_active_tools()

        api.register_command("note", note)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("/note")
        await trio.testing.wait_all_tasks_blocked()
        await h.session.prompt("question")
        entries = await h.session.store.entries()
        sent = h.faux.last_request.context.messages
    custom = next(e for e in entries if isinstance(e, CustomEntry))
    label = next(e for e in entries if isinstance(e, LabelEntry))
    assert custom.custom_type == "state" and custom.data == {"n": 1}
    assert label.target_id == custom.id and label.label == "bookmark"
    assert [text_of(m.content) for m in sent][:2] == ["question", "remember this"]


async def test_model_select_and_session_start_notify(tmp_path: Path, agent_dir: Path) -> None:
    seen: list[Any] = []

    def setup(api: Any) -> None:
        api.on("session_start", lambda e, c: seen.append(("start", e.reason)))
        api.on("agent_settled", lambda e, c: seen.append(("settled",)))

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("hi")
        await trio.testing.wait_all_tasks_blocked()
    assert seen == [("start", "startup"), ("settled",)]


async def test_handlers_may_call_back_into_the_session_without_deadlock(
    tmp_path: Path, agent_dir: Path
) -> None:
    names: list[Any] = []

    def setup(api: Any) -> None:
        async def on_input(event: Any, ctx: Any) -> None:
            names.append(await api.get_session_name())
            names.append(await ctx.is_idle())

        async def on_end(event: Any, ctx: Any) -> None:
            names.append(len(await ctx.session_manager.entries()))

        api.on("input", on_input)
        api.on("agent_end", on_end)

    async with session_with(tmp_path, setup) as h:
        with trio.fail_after(5):
            await h.session.prompt("hi")
    assert names[:2] == [None, True] and isinstance(names[2], int)


async def test_late_registered_tool_is_available(tmp_path: Path, agent_dir: Path) -> None:
    def setup(api: Any) -> None:
        api.on("session_start", lambda e, c: api.register_tool(_echo_tool()))

    async with session_with(tmp_path, setup, replies=(_tool_reply("echo", {"text": "z"}),)) as h:
        await trio.testing.wait_all_tasks_blocked()
        await h.session.prompt("go")
        messages = await h.session.messages()
    result = next(m for m in messages if isinstance(m, ToolResultMessage))
    assert text_of(result.content) == "echo z" and not result.is_error


def test_discovery_order_packages_and_duplicates(tmp_path: Path) -> None:
    cwd, agent = tmp_path / "proj", tmp_path / "agent"
    project = cwd / ".pitrio" / "extensions"
    project.mkdir(parents=True)
    (project / "b_tool.py").write_text("def setup(api): pass\n")
    (project / "a_gate.py").write_text("def setup(api): pass\n")
    (project / "_private.py").write_text("")
    (project / "notes.txt").write_text("")
    package = agent / "extensions" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def setup(api): pass\n")
    (agent / "extensions" / "no_init").mkdir()
    extra = tmp_path / "extra.py"
    extra.write_text("def setup(api): pass\n")
    found = discover_extensions(
        str(cwd),
        agent,
        setting_paths=[str(extra)],
        cli_paths=[str(extra), str(project / "a_gate.py")],
    )
    assert [(f.path.name, f.scope, f.source) for f in found] == [
        ("a_gate.py", "project", "local"),
        ("b_tool.py", "project", "local"),
        ("pkg", "user", "local"),
        ("extra.py", "user", "settings"),
    ]
    only_cli = discover_extensions(str(cwd), agent, cli_paths=[str(extra)], discover=False)
    assert [(f.path.name, f.scope) for f in only_cli] == [("extra.py", "temporary")]


async def test_load_errors_name_the_file(tmp_path: Path, agent_dir: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('bad import')\n")
    no_setup = tmp_path / "nosetup.py"
    no_setup.write_text("x = 1\n")
    failing = tmp_path / "failing.py"
    failing.write_text("def setup(api):\n    api.on('no_such_event', print)\n")
    for path, message in (
        (broken, "ValueError: bad import"),
        (no_setup, "no setup(api) function"),
        (failing, "Unknown extension event"),
    ):
        with pytest.raises(
            ExtensionLoadError, match=re.escape(path.name) + ".*" + re.escape(message)
        ):
            async with pitrio.create_session(
                cwd=str(tmp_path / "proj"),
                model="faux/faux-1",
                persist=False,
                extensions=[str(path)],
            ):
                pass


async def test_a_project_extension_is_discovered_and_its_tool_reaches_the_prompt(
    tmp_path: Path, agent_dir: Path
) -> None:
    directory = tmp_path / "proj" / ".pitrio" / "extensions"
    directory.mkdir(parents=True)
    (directory / "shout.py").write_text(
        "from pitrio.actors.tool_executor import AgentTool, text_result\n"
        "async def run(call_id, args, on_update):\n"
        "    return text_result(args['text'].upper())\n"
        "def setup(api):\n"
        "    api.register_tool(AgentTool(name='shout', description='Shout text',\n"
        "        prompt_snippet='Shout some text', execute=run,\n"
        "        parameters={'type': 'object', 'properties': {'text': {'type': 'string'}}}))\n"
    )
    faux = FauxProvider([_tool_reply("shout", {"text": "hey"}), FauxReply(text="ok")])
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"), model="faux/faux-1", persist=False, faux=faux
    ) as session:
        await session.prompt("go")
        messages = await session.messages()
    assert "shout: Shout some text" in faux.requests[0].context.system_prompt
    result = next(m for m in messages if isinstance(m, ToolResultMessage))
    assert text_of(result.content) == "HEY"
    assert user_message("x").role == "user"


async def _talk(h: Harness, turns: int) -> None:
    for index in range(turns):
        await h.session.prompt(f"question number {index} " + "words " * 40)


SMALL_KEEP = '{"compaction": {"keepRecentTokens": 60}}'


async def test_compaction_hooks_fire_in_order_with_the_entry_written(  # S80, S83, S85
    tmp_path: Path, agent_dir: Path
) -> None:
    order: list[Any] = []

    def setup(api: Any) -> None:
        def before(event: Any, ctx: Any) -> None:
            prep = event.preparation
            order.append(("before", prep.tokens_before >= 0, isinstance(prep.is_split_turn, bool)))
            order.append(("branch", len(event.branch_entries) > 0))

        async def after(event: Any, ctx: Any) -> None:
            entries = await ctx.session_manager.entries()
            order.append(("after", event.from_extension, event.compaction_entry in entries))

        api.on("session_before_compact", before)
        api.on("session_compact", after)

    async with session_with(tmp_path, setup, settings=SMALL_KEEP) as h:
        await _talk(h, 3)
        result = await h.session.compact()
    assert result.summary
    assert order == [("before", True, True), ("branch", True), ("after", False, True)]


async def test_a_before_compact_handler_cancels_or_supplies_the_result(  # S81, S82, S87
    tmp_path: Path, agent_dir: Path
) -> None:
    mode = {"value": "cancel"}
    compacted: list[bool] = []

    def setup(api: Any) -> None:
        def before(event: Any, ctx: Any) -> Any:
            if mode["value"] == "cancel":
                return {"cancel": True}
            return {
                "compaction": {
                    "summary": "custom summary",
                    "firstKeptEntryId": event.preparation.first_kept_entry_id,
                    "tokensBefore": 999,
                }
            }

        api.on("session_before_compact", before)
        api.on("session_compact", lambda e, c: compacted.append(e.from_extension))

    async with session_with(tmp_path, setup, settings=SMALL_KEEP) as h:
        await _talk(h, 3)
        requests = len(h.faux.requests)
        with pytest.raises(PitrioError, match="Compaction cancelled"):
            await h.session.compact()
        assert compacted == []
        mode["value"] = "supply"
        result = await h.session.compact()
        assert len(h.faux.requests) == requests  # no summary request was made
    assert (result.summary, result.tokens_before) == ("custom summary", 999)
    assert compacted == [True]


async def test_a_raising_before_compact_handler_leaves_the_default(  # S84
    tmp_path: Path, agent_dir: Path
) -> None:
    flags: list[bool] = []

    def setup(api: Any) -> None:
        def before(event: Any, ctx: Any) -> None:
            raise RuntimeError("broken hook")

        api.on("session_before_compact", before)
        api.on("session_compact", lambda e, c: flags.append(e.from_extension))

    async with session_with(tmp_path, setup, settings=SMALL_KEEP) as h:
        await _talk(h, 3)
        result = await h.session.compact()
        errors = [e for e in await h.drain() if isinstance(e, ExtensionError)]
    assert result.summary and flags == [False]
    assert errors[0].event == "session_before_compact" and errors[0].error == "broken hook"


async def test_model_and_thinking_changes_notify(tmp_path: Path, agent_dir: Path) -> None:
    seen: list[Any] = []

    def setup(api: Any) -> None:
        api.on("thinking_level_select", lambda e, c: seen.append(("level", e.level)))
        api.on(
            "model_select",
            lambda e, c: seen.append(("model", e.model.id, e.previous_model.id, e.source)),
        )

    async with session_with(tmp_path, setup) as h:
        await h.session.set_model("faux", "faux-think")
        await h.session.set_thinking_level("high")
        await trio.testing.wait_all_tasks_blocked()
    assert ("model", "faux-think", "faux-1", "set") in seen
    assert seen[-1] == ("level", "high")


async def test_replacements_ask_and_tell_the_extensions(tmp_path: Path, agent_dir: Path) -> None:
    from pitrio.actors.model_router import RouterConfig, start_model_router
    from pitrio.actors.session.bootstrap import SessionOptions
    from pitrio.actors.session.runtime import SessionReplacementCancelled, SessionRuntime

    seen: list[Any] = []
    refuse = {"switch": True, "fork": True}

    def setup(api: Any) -> None:
        api.on("session_start", lambda e, c: seen.append(("start", e.reason)))
        api.on("session_shutdown", lambda e, c: seen.append(("shutdown", e.reason)))
        api.on(
            "session_before_switch",
            lambda e, c: {"cancel": refuse["switch"]} if e.reason == "new" else None,
        )
        api.on(
            "session_before_fork",
            lambda e, c: seen.append(("before_fork", e.position)) or {"cancel": refuse["fork"]},
        )

    extension_probe.setup = setup
    path = extension_probe.write_bridge(tmp_path / "exts")
    options = SessionOptions(
        cwd=str(tmp_path / "proj"),
        model="faux/faux-1",
        session_dir=str(tmp_path / "s"),
        agent_dir=agent_dir,
        extensions=(str(path),),
    )
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery, FauxProvider(), config=RouterConfig(catalogue=False)
        )
        runtime = SessionRuntime(nursery, router)
        first = await runtime.start(options)
        await first.session.prompt("hello")
        with pytest.raises(SessionReplacementCancelled):
            await runtime.new_session()
        with pytest.raises(SessionReplacementCancelled):
            await runtime.clone()
        assert runtime.current is first  # nothing was replaced
        refuse.update(switch=False, fork=False)
        await runtime.new_session()
        await trio.testing.wait_all_tasks_blocked()
        # pi refuses to clone a session without messages: give the new one a turn.
        await runtime.current.session.prompt("hello again")
        await runtime.clone()
        await trio.testing.wait_all_tasks_blocked()
        await runtime.aclose()
        nursery.cancel_scope.cancel()
    assert seen == [
        ("start", "startup"),
        ("before_fork", "at"),
        ("shutdown", "new"),
        ("start", "new"),
        ("before_fork", "at"),
        ("shutdown", "fork"),
        ("start", "fork"),
        ("shutdown", "quit"),
    ]


async def test_turn_end_drafts_are_written_after_the_turn_and_reach_the_next_request(
    tmp_path: Path, agent_dir: Path
) -> None:
    seen: list[Any] = []

    def setup(api: Any) -> None:
        api.register_tool(_echo_tool())

        def first(event: Any, ctx: Any) -> Any:
            seen.append(
                (
                    event.turn_index,
                    event.message_entry_id is not None,
                    len(event.tool_result_entry_ids),
                )
            )
            if len(seen) == 1:  # the first turn only (a continuation starts at 0 again)
                return {
                    "entries": [
                        {"type": "custom", "customType": "turn-state", "data": {"turn": 0}},
                        {"type": "custom_message", "customType": "hint", "content": "use care"},
                    ]
                }
            return None

        def second(event: Any, ctx: Any) -> Any:
            # Sees the drafts of the handler before it.
            seen.append(("second sees", len(event.entries)))
            return None

        api.on("turn_end", first)
        api.on("turn_end", second)

    replies = (_tool_reply("echo", {"text": "a"}), FauxReply(text="done"))
    async with session_with(tmp_path, setup, replies=replies) as h:
        await h.session.prompt("go")
        entries = await h.session.store.entries()
        second_request = h.faux.requests[1].context.messages
    assert seen[:2] == [(0, True, 1), ("second sees", 2)]
    kinds = [e.type for e in entries if e.type in ("message", "custom", "custom_message")]
    # Never between the tool call and its result: after the turn's tool result.
    assert kinds[-5:] == ["message", "message", "custom", "custom_message", "message"]
    assert text_of(second_request[-1].content) == "use care"


async def test_agent_before_settle_can_add_a_message_and_continue_once(
    tmp_path: Path, agent_dir: Path
) -> None:
    outcomes: list[Any] = []

    def setup(api: Any) -> None:
        def before_settle(event: Any, ctx: Any) -> Any:
            outcomes.append((event.outcome, event.can_continue))
            if len(outcomes) == 1:
                return {
                    "entries": [
                        {
                            "type": "custom_message",
                            "customType": "check",
                            "content": "double-check that",
                        }
                    ],
                    "continue": True,
                }
            return {"continue": True}  # cannot continue after a reply: reported, ignored

        api.on("agent_before_settle", before_settle)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("hello")
        events = await h.drain()
    assert outcomes == [("completed", False), ("completed", False)]
    assert [text_of(r.context.messages[-1].content) for r in h.faux.requests] == [
        "hello",
        "double-check that",
    ]
    errors = [e for e in events if isinstance(e, ExtensionError)]
    assert (len(errors) == 1 and "cannot" not in errors[0].error) or "assistant" in errors[0].error


async def test_malformed_drafts_are_all_dropped(tmp_path: Path, agent_dir: Path) -> None:
    def setup(api: Any) -> None:
        api.on(
            "agent_before_settle",
            lambda e, c: {
                "entries": [
                    {"type": "custom", "customType": "fine"},
                    {"type": "message", "content": "not allowed"},
                ],
                "continue": True,
            },
        )

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("hello")
        entries = await h.session.store.entries()
        events = await h.drain()
    assert not any(e.type == "custom" for e in entries)
    errors = [e for e in events if isinstance(e, ExtensionError)]
    assert any("draft 1" in e.error and "type must be" in e.error for e in errors)
    assert len(h.faux.requests) == 1


async def test_a_changed_tool_set_reaches_the_model_as_a_system_patch(
    tmp_path: Path, agent_dir: Path
) -> None:
    from pitrio.messages.agent import SystemMessage

    def setup(api: Any) -> None:
        async def only_read(args: str, ctx: Any) -> None:
            await api.set_active_tools(["read"])

        api.register_command("only-read", only_read)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("first")
        first = h.faux.last_request.context
        await h.session.prompt("/only-read")
        await h.session.prompt("second")
        second = h.faux.last_request.context
        await h.session.prompt("third")  # nothing changed since: no new patch
        third = h.faux.last_request.context
        entries = await h.session.store.entries()
        context = await h.session.store.context_messages()
    # pi 1.6.0: the change is a system message in the transcript (sections patched by name,
    # the tool removed), never a chat message; the request's prompt is the replay.
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert "- bash:" in first.system_prompt and "- bash:" not in second.system_prompt
    assert "<tools>\n- read:" in second.system_prompt
    assert [t.name for t in first.tools] == ["read", "bash", "edit", "write"]
    assert [t.name for t in second.tools] == ["read"]
    assert third.system_prompt == second.system_prompt
    systems = [
        e.message
        for e in entries
        if isinstance(e, MessageEntry) and isinstance(e.message, SystemMessage)
    ]
    assert len(systems) == 2  # the leading one, then the patch; nothing for "third"
    leading, patch = systems
    assert leading.sections is not None and next(iter(leading.sections)) == "preamble"
    assert [t.name for t in leading.tools_added or ()] == ["read", "bash", "edit", "write"]
    assert patch.sections is not None and set(patch.sections) == {"tools", "rules"}
    assert [r.name for r in patch.tools_removed or ()] == ["bash", "edit", "write"]
    assert patch.tools_added is None
    assert sum(isinstance(m, SystemMessage) for m in context) == 2  # they project back


async def test_a_registered_provider_serves_the_session_over_real_http(
    tmp_path: Path, agent_dir: Path
) -> None:
    from tests.actors.providers.loopback import loopback_server, recording, sse

    async with loopback_server() as server:
        server.push(sse(recording("openai_completions_text.sse")))
        config = {
            "baseUrl": f"{server.base_url}/v1",
            "api": "openai-completions",
            "apiKey": "local-key",
            "models": [{"id": "tiny", "contextWindow": 4096}],
        }

        def setup(api: Any) -> None:
            api.register_provider("local", config)

        extension_probe.setup = setup
        path = extension_probe.write_bridge(tmp_path / "exts")
        async with pitrio.create_session(
            cwd=str(tmp_path / "proj"),
            model="local/tiny",  # resolvable because setup registered it first
            persist=False,
            extensions=[str(path)],
        ) as session:
            await session.prompt("hi")
            messages = await session.messages()
    reply = messages[-1]
    assert isinstance(reply, AssistantMessage)
    assert text_of(reply.content) == "Hello, world! Ünïcödé ✓"
    assert reply.provider == "local" and reply.model == "tiny"
    assert server.requests[0].headers.get("authorization") == "Bearer local-key"


async def test_an_invalid_provider_block_fails_start_up_naming_the_extension(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        api.register_provider("broken", {"api": "openai-completions", "models": [{"id": "x"}]})

    extension_probe.setup = setup
    path = extension_probe.write_bridge(tmp_path / "exts")
    with pytest.raises(ExtensionLoadError, match=r"probe_ext\.py.*baseUrl"):
        async with pitrio.create_session(
            cwd=str(tmp_path / "proj"),
            model="faux/faux-1",
            persist=False,
            extensions=[str(path)],
        ):
            pass


async def test_a_tool_runs_another_through_execute_tool_with_hooks_and_a_record(
    tmp_path: Path, agent_dir: Path
) -> None:
    seen: list[tuple[str, str, str | None]] = []

    def setup(api: Any) -> None:
        api.register_tool(_echo_tool())

        async def relay(call_id: str, args: dict[str, Any], on_update: Any) -> Any:
            callable_names = await api.get_callable_tools()
            assert {"echo", "relay", "read"} <= set(callable_names)
            assert "codemode" not in callable_names  # registered, inactive, model-only
            inner = await api.execute_tool("echo", {"text": "inner"})
            ghost = await api.execute_tool("ghost", {})
            assert ghost.is_error
            return text_result(f"relayed {text_of(inner.result.content)} as {inner.tool_call_id}")

        api.register_tool(AgentTool(name="relay", execute=relay))

        async def gate(event: Any, ctx: Any) -> Any:
            seen.append(("call", event.tool_call_id, event.parent_tool_call_id))

        async def after(event: Any, ctx: Any) -> Any:
            seen.append(("result", event.tool_call_id, event.parent_tool_call_id))

        api.on("tool_call", gate)
        api.on("tool_result", after)

    replies = (_tool_reply("relay", {}), FauxReply(text="done"))
    async with session_with(tmp_path, setup, replies=replies) as h:
        await h.session.prompt("go")
        messages = await h.session.messages()
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    call_id = result.tool_call_id
    assert text_of(result.content) == f"relayed echo inner as {call_id}/1"
    assert result.nested_calls is not None
    assert [(c.id, c.name, c.status) for c in result.nested_calls.calls] == [
        (f"{call_id}/1", "echo", "ok"),
        (f"{call_id}/2", "ghost", "error"),
    ]
    assert seen == [
        ("call", call_id, None),
        ("call", f"{call_id}/1", call_id),
        ("result", f"{call_id}/1", call_id),
        ("result", call_id, None),
    ]
