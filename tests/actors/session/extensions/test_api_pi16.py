"""pi 1.6.0's additions to the extension API and ``ctx`` (issue 35, item 5): ``on()`` returns
an unsubscribe function, ``ctx.mode``, ``ctx.is_project_trusted()``, ``session_info_changed``,
``ui_prompt_start`` / ``ui_prompt_end`` and ``user_bash`` (failing closed), in a running
session on the faux model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.session.extensions.events import UiPromptEvent, UserBashEvent
from pitrio.actors.session.user_bash import BashResult
from pitrio.errors import PitrioError
from pitrio.messages.agent import BashExecutionMessage
from pitrio.messages.content import text_of
from pitrio.messages.events import (
    AgentEnd,
    BashExecutionUpdate,
    ExtensionError,
    ExtensionUiRequest,
)
from tests.actors.test_session_extensions import agent_dir, session_with

__all__ = ["agent_dir"]  # the fixture, used by name


async def test_on_returns_a_function_that_removes_only_that_registration(
    tmp_path: Path, agent_dir: Path
) -> None:
    seen: list[str] = []
    handles: dict[str, Any] = {}

    def setup(api: Any) -> None:
        def once(event: Any, ctx: Any) -> None:
            seen.append("once")
            handles["once"]()  # removes itself while the dispatch is in progress

        def always(event: Any, ctx: Any) -> None:
            seen.append("always")

        handles["once"] = api.on("agent_start", once)
        api.on("agent_start", always)
        handles["twin"] = api.on("agent_start", always)  # the same function, again

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("one")
        await h.drain()
        assert seen == ["once", "always", "always"]  # the dispatch kept its handlers
        handles["twin"]()  # one of the two registrations of ``always`` goes
        handles["twin"]()  # a second call changes nothing
        await h.session.prompt("two")
        await h.drain()
    assert seen == ["once", "always", "always", "always"]


@pytest.mark.parametrize(("ui", "mode"), [(True, "rpc"), (False, "print")])
async def test_ctx_mode_and_project_trust(
    tmp_path: Path, agent_dir: Path, ui: bool, mode: str
) -> None:
    seen: list[Any] = []

    def setup(api: Any) -> None:
        def start(event: Any, ctx: Any) -> None:
            seen.extend([ctx.mode, ctx.is_project_trusted()])

        async def command(args: str, ctx: Any) -> None:
            await trio.lowlevel.checkpoint()
            seen.extend([ctx.mode, ctx.is_project_trusted()])

        api.on("agent_start", start)
        api.register_command("where", command)

    async with session_with(tmp_path, setup, ui=ui) as h:
        await h.session.prompt("hi")
        await h.session.prompt("/where")
    assert seen == [mode, True, mode, True]


async def test_ctx_mode_names_the_transport_and_trust_follows_the_decision(
    tmp_path: Path, agent_dir: Path
) -> None:
    import pitrio
    from tests.actors import extension_probe

    seen: list[Any] = []

    def setup(api: Any) -> None:
        api.on("agent_start", lambda event, ctx: seen.append((ctx.mode, ctx.is_project_trusted())))

    extension_probe.setup = setup
    path = extension_probe.write_bridge(tmp_path / "exts")
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"),
        model="faux/echo",
        persist=False,
        extensions=[str(path)],
        mode="json",
        project_trust=False,  # as ``--no-approve``: the project's files are not trusted
    ) as session:
        await session.prompt("hi")
    assert seen == [("json", False)]


async def test_session_info_changed_reaches_handlers(tmp_path: Path, agent_dir: Path) -> None:
    names: list[Any] = []

    def setup(api: Any) -> None:
        api.on("session_info_changed", lambda event, ctx: names.append((event.type, event.name)))

    async with session_with(tmp_path, setup) as h:
        await h.session.handle.set_session_name("  first  ")
        await h.session.handle.set_session_name("second")
        await h.drain()
    assert names == [("session_info_changed", "first"), ("session_info_changed", "second")]


async def test_ui_prompt_spans_are_coalesced_and_not_awaited(
    tmp_path: Path, agent_dir: Path
) -> None:
    spans: list[UiPromptEvent] = []
    release = trio.Event()
    answers: list[Any] = []

    def setup(api: Any) -> None:
        async def slow(event: UiPromptEvent, ctx: Any) -> None:
            spans.append(event)
            await release.wait()  # a handler that does not return: the dialog goes on

        async def ask(args: str, ctx: Any) -> None:
            async with trio.open_nursery() as nursery:  # two dialogs open at once

                async def second() -> None:
                    answers.append(await ctx.ui.input("Name?"))

                nursery.start_soon(second)
                answers.append(await ctx.ui.select("Pick", ["a", "b"]))

        api.on("ui_prompt_start", slow)
        api.on("ui_prompt_end", lambda event, ctx: spans.append(event))
        api.register_command("ask", ask)

    async with session_with(tmp_path, setup) as h:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.session.prompt, "/ask")
            first = await h.next_of(ExtensionUiRequest)
            second = await h.next_of(ExtensionUiRequest)
            by_method = {first.method: first, second.method: second}
            await h.session.respond_ui(by_method["select"].id, value="b")
            await h.session.respond_ui(by_method["input"].id, value="me")
        assert sorted(answers) == ["b", "me"]  # answered while the start handler still waits
        release.set()
        await h.drain()
    assert [(s.type, s.reason) for s in spans] == [
        ("ui_prompt_start", "ui_prompt"),
        ("ui_prompt_end", "ui_prompt"),
    ]
    assert spans[0].kind == spans[1].kind and spans[0].title == spans[1].title


async def test_user_bash_handlers_replace_or_reroute_the_command(
    tmp_path: Path, agent_dir: Path
) -> None:
    events: list[UserBashEvent] = []

    class Remote:
        async def exec(self, command: str, cwd: str, *, on_data: Any) -> dict[str, int]:
            await on_data(b"remote: ")
            await on_data(command.encode())
            return {"exitCode": 7}

    def setup(api: Any) -> None:
        def intercept(event: UserBashEvent, ctx: Any) -> Any:
            events.append(event)
            if event.command.startswith("echo"):
                return None  # run it here
            if event.command.startswith("remote"):
                return {"operations": Remote()}
            return {
                "result": {
                    "output": "canned",
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                }
            }

        api.on("user_bash", intercept)

    (tmp_path / "proj").mkdir()
    async with session_with(tmp_path, setup) as h:
        canned = await h.session.handle.bash("rm -rf /nowhere", exclude_from_context=True)
        remote = await h.session.handle.bash("remote ls")
        local = await h.session.handle.bash("echo local")
        seen = await h.drain()
        context = await h.session.handle.invoke(lambda actor: actor._store.context_messages())
    assert canned == BashResult(output="canned", exit_code=0, cancelled=False, truncated=False)
    assert (remote.output, remote.exit_code) == ("remote: remote ls", 7)
    assert local.output == "local\n"
    assert [(e.command, e.exclude_from_context, e.cwd) for e in events][:2] == [
        ("rm -rf /nowhere", True, str(tmp_path / "proj")),
        ("remote ls", False, str(tmp_path / "proj")),
    ]
    updates = "".join(e.delta for e in seen if isinstance(e, BashExecutionUpdate))
    assert "remote: remote ls" in updates
    recorded = [m.command for m in context if isinstance(m, BashExecutionMessage)]
    assert recorded == ["rm -rf /nowhere", "remote ls", "echo local"]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (RuntimeError("no shell for you"), "no shell for you"),
        ({"result": {"output": 3}}, "Invalid user_bash handler result"),
        ({"operations": object(), "result": None}, "Invalid user_bash handler result"),
    ],
)
async def test_user_bash_fails_closed(
    tmp_path: Path, agent_dir: Path, answer: Any, message: str
) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "proj").mkdir()

    def setup(api: Any) -> None:
        def intercept(event: UserBashEvent, ctx: Any) -> Any:
            if isinstance(answer, Exception):
                raise answer
            return answer

        api.on("user_bash", intercept)

    async with session_with(tmp_path, setup) as h:
        with pytest.raises(PitrioError, match=message):
            await h.session.handle.bash(f"touch {marker}")
        error = await h.next_of(ExtensionError)
        context = await h.session.handle.invoke(lambda actor: actor._store.context_messages())
    assert not marker.exists()  # never fell back to running it
    assert error.event == "user_bash" and message in error.error
    assert not any(isinstance(m, BashExecutionMessage) for m in context)


async def test_before_agent_start_runs_for_a_custom_message_run(
    tmp_path: Path, agent_dir: Path
) -> None:
    starts: list[Any] = []

    def setup(api: Any) -> None:
        def before(event: Any, ctx: Any) -> Any:
            starts.append((event.message_type, event.prompt, event.message))
            if event.message_type == "custom":
                return {"message": {"customType": "note", "content": "added for custom runs"}}
            return None

        async def kick(args: str, ctx: Any) -> None:
            await trio.lowlevel.checkpoint()
            api.send_message("ping", "wake up", trigger_turn=True)

        api.on("before_agent_start", before)
        api.register_command("kick", kick)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("hello")
        await h.session.prompt("/kick")
        await h.next_of(AgentEnd)  # the prompt's run
        await h.next_of(AgentEnd)  # the run the custom message started
        await h.session.handle.wait_for_idle()
        sent = h.faux.last_request.context.messages
    assert [(kind, prompt) for kind, prompt, _ in starts] == [("user", "hello"), ("custom", "")]
    assert starts[0][2] is None and starts[1][2].custom_type == "ping"
    texts = [text_of(m.content) for m in sent if m.role == "user"]
    assert texts[-2:] == ["wake up", "added for custom runs"]


async def test_boundaries_carry_the_outcome_and_the_context(
    tmp_path: Path, agent_dir: Path
) -> None:
    from pitrio.actors.model_router import FauxReply

    seen: list[Any] = []

    def setup(api: Any) -> None:
        def turn_end(event: Any, ctx: Any) -> None:
            seen.append(("turn_end", event.outcome, event.context))

        def before_settle(event: Any, ctx: Any) -> None:
            seen.append(("agent_before_settle", event.outcome, event.context))

        api.on("turn_end", turn_end)
        api.on("agent_before_settle", before_settle)

    async with session_with(tmp_path, setup, replies=(FauxReply(text="fine"),)) as h:
        await h.session.prompt("go")
    (turn, _, turn_context), (settle, outcome, settle_context) = seen
    assert (turn, settle, outcome) == ("turn_end", "agent_before_settle", "completed")
    assert seen[0][1] == "completed"
    # The turn's reply is persisted and projected: it ends the context, so no continuation.
    assert [m.role for m in turn_context.context_messages][-2:] == ["user", "assistant"]
    assert turn_context.can_continue is False
    assert settle_context.context_messages == turn_context.context_messages
    assert settle_context.can_continue is False


async def test_each_boundary_handler_sees_the_drafts_before_it_applied(
    tmp_path: Path, agent_dir: Path
) -> None:
    """pi 1.6.0 builds a boundary's ``context`` for each handler with the drafts of the
    handlers before it applied (not written): a custom message shows at the end, an edit
    that omits the user's message takes it out, and the file has neither until the end."""
    from pitrio.actors.model_router import FauxReply

    seen: list[tuple[str, Any, int]] = []
    files: list[int] = []

    def setup(api: Any) -> None:
        async def first(event: Any, ctx: Any) -> Any:
            seen.append(("first", event.context, len(event.entries)))
            files.append(len(await ctx.session_manager.entries()))
            user = next(
                e
                for e in await ctx.session_manager.branch()
                if getattr(getattr(e, "message", None), "role", None) == "user"
            )
            return {
                "entries": [
                    {"type": "context_edit", "targetId": user.id, "replacement": None},
                    {"type": "custom_message", "customType": "note", "content": "noted"},
                ]
            }

        async def second(event: Any, ctx: Any) -> None:
            seen.append(("second", event.context, len(event.entries)))
            files.append(len(await ctx.session_manager.entries()))

        def third(event: Any, ctx: Any) -> Any:
            seen.append(("third", event.context, len(event.entries)))
            return {"entries": []}  # takes the drafts back

        def fourth(event: Any, ctx: Any) -> None:
            seen.append(("fourth", event.context, len(event.entries)))

        for handler in (first, second, third, fourth):
            api.on("agent_before_settle", handler)

    async with session_with(tmp_path, setup, replies=(FauxReply(text="fine"),)) as h:
        await h.session.prompt("go")
    by_name = {name: (context, entries) for name, context, entries in seen}
    base, _ = by_name["first"]
    assert [m.role for m in base.context_messages][-2:] == ["user", "assistant"]
    applied, drafts = by_name["second"]
    assert drafts == 2
    roles = [m.role for m in applied.context_messages]
    assert "user" not in roles and roles[-1] == "custom"  # the edit and the message applied
    assert text_of(applied.context_messages[-1].content) == "noted"
    assert [m.role for m in applied.llm_messages][-2:] == ["assistant", "user"]  # pi's llmMessages
    assert applied.can_continue is True  # it ends with the custom message now
    assert base.can_continue is False
    assert by_name["fourth"][0].context_messages == base.context_messages  # drafts withdrawn
    assert files[0] == files[1]  # previewing wrote nothing


async def test_a_cancelled_compaction_is_session_compact_failed(
    tmp_path: Path, agent_dir: Path
) -> None:
    from tests.actors.test_session_extensions import SMALL_KEEP, _talk

    failures: list[Any] = []

    def setup(api: Any) -> None:
        api.on("session_before_compact", lambda event, ctx: {"cancel": True})
        api.on("session_compact_failed", lambda event, ctx: failures.append(event))

    async with session_with(tmp_path, setup, settings=SMALL_KEEP) as h:
        await _talk(h, 3)
        with pytest.raises(PitrioError):
            await h.session.compact()
        await h.drain()
    (failed,) = failures
    assert (failed.type, failed.reason, failed.aborted, failed.will_retry) == (
        "session_compact_failed",
        "manual",
        True,
        False,
    )
    assert failed.error_message is None and failed.from_extension is False
