"""The session actor's compaction, model/thinking and naming commands, end to end on a store."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import orjson
import pytest
import trio
import trio.testing

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.model_router import (
    FauxProvider,
    FauxReply,
    RouterConfig,
    start_model_router,
)
from pitrio.actors.session.actor import SessionActor
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session.user_bash import BashResult
from pitrio.actors.session_store import create_store
from pitrio.actors.supervisor.compaction import CompactionSettings, estimate_tokens
from pitrio.errors import PitrioError
from pitrio.messages.agent import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    UserMessage,
)
from pitrio.messages.content import text_of
from pitrio.messages.entries import (
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from pitrio.messages.events import (
    BashExecutionUpdate,
    CompactionEnd,
    CompactionStart,
    SessionInfoChanged,
    ThinkingLevelChanged,
)
from tests.actors.session_harness import FAUX_1, FAUX_SMALL, FIXTURE_SETTINGS, session


async def test_manual_compaction_then_already_compacted() -> None:
    async with session(settings=FIXTURE_SETTINGS) as fx:
        # Long enough that the 60 kept tokens leave the first turns to summarize.
        for text in ("first question " * 20, "second question " * 20, "third question"):
            await fx.session.prompt(text)
        await fx.drain()
        result = await fx.session.compact()
        events = await fx.drain()
        context = await fx.store.context_messages()
        entries = await fx.store.entries()
        with pytest.raises(PitrioError, match=r"^Already compacted$"):
            await fx.session.compact()
        failed = await fx.drain()
    assert result.summary.startswith("## Goal\nCompaction summary (scripted)")
    # pi 1.6.0 announces no compaction entry with entry_appended.
    assert [e.type for e in events] == ["compaction_start", "compaction_end"]
    start, end = events
    assert isinstance(start, CompactionStart) and start.reason == "manual"
    assert isinstance(end, CompactionEnd) and end.result == result and not end.will_retry
    assert isinstance(context[0], CompactionSummaryMessage)
    assert context[0].summary == result.summary
    # pi 1.6.0's result fields: the estimate of what was left, and what the summary cost.
    assert result.estimated_tokens_after == sum(estimate_tokens(m) for m in context)
    assert 0 < result.estimated_tokens_after < result.tokens_before
    assert result.usage is not None and result.usage.total_tokens > 0
    (entry,) = [e for e in entries if isinstance(e, CompactionEntry)]
    assert entry.usage == result.usage
    assert [e.type for e in failed] == ["compaction_start", "compaction_end"]
    end = failed[-1]
    assert isinstance(end, CompactionEnd)
    assert end.error_message == "Compaction failed: Already compacted" and end.result is None


async def test_compacting_an_empty_session_is_nothing_to_compact() -> None:
    # pi 1.6.0 refuses (0.73.1 answered a summary of nothing with 0 tokens).
    async with session() as fx:
        with pytest.raises(PitrioError, match=r"^Nothing to compact \(session too small\)$"):
            await fx.session.compact()
        events = await fx.drain()
    assert [e.type for e in events] == ["compaction_start", "compaction_end"]
    end = events[-1]
    assert isinstance(end, CompactionEnd) and end.result is None
    assert end.error_message == "Compaction failed: Nothing to compact (session too small)"


async def test_a_session_that_fits_the_kept_budget_is_nothing_to_compact() -> None:
    async with session() as fx:
        await fx.session.prompt("one short question")
        await fx.drain()
        with pytest.raises(PitrioError, match=r"^Nothing to compact"):
            await fx.session.compact()
        entries = await fx.store.entries()
    assert not any(isinstance(e, CompactionEntry) for e in entries)


async def test_overflow_compacts_and_retries_once_in_one_run() -> None:
    async with session() as fx:
        await fx.session.prompt("hello")
        await fx.drain()
        # Past the 60 kept tokens by itself: the first turn is summarized and the prompt,
        # followed only by its omitted failure, goes into the split turn's prefix (pi 1.6.0).
        await fx.session.prompt("OVERFLOW: a huge request " + "padding " * 40)
        events = await fx.drain()
        context = await fx.store.context_messages()
    kinds = [e.type for e in events]
    assert kinds.count("agent_settled") == 1 and kinds[-1] == "agent_settled"
    assert kinds.count("agent_start") == 2
    start = next(e for e in events if isinstance(e, CompactionStart))
    end = next(e for e in events if isinstance(e, CompactionEnd))
    assert start.reason == "overflow" and end.reason == "overflow"
    assert end.will_retry and end.result is not None
    first_end = next(e for e in events if e.type == "agent_end")
    # pi 1.6.0: false before an overflow recovery (only a transient failure's retry is
    # announced on agent_end; pitrio said true before).
    assert first_end.will_retry is False  # type: ignore[union-attr]
    # The failed response left the projection. Everything it followed was summarized (the
    # prompt in the split turn's part), so the retry continues from the summary alone.
    assert not any(isinstance(m, AssistantMessage) and m.stop_reason == "error" for m in context)
    assert [m.role for m in context] == ["compactionSummary", "assistant"]
    assert end.result.summary.count("Turn Context (split turn)") == 1
    recovered = context[-1]
    assert isinstance(recovered, AssistantMessage) and recovered.stop_reason == "stop"


async def test_threshold_compaction_after_a_run() -> None:
    settings = attrs.evolve(
        FIXTURE_SETTINGS,
        compaction=CompactionSettings(keep_recent_tokens=60, reserve_tokens=20_000 - 1_500),
    )
    async with session(model=FAUX_SMALL, settings=settings) as fx:
        await fx.session.prompt("hello")  # far below the threshold: no compaction
        assert not any(isinstance(e, CompactionStart) for e in await fx.drain())
        # ~2,000 tokens of input: past 1,500, and a first turn before it to summarize (a
        # session of one turn is nothing to compact in pi 1.6.0).
        await fx.session.prompt("x " * 4_000)
        events = await fx.drain()
    start = next(e for e in events if isinstance(e, CompactionStart))
    end = next(e for e in events if isinstance(e, CompactionEnd))
    assert start.reason == "threshold" and end.result is not None and not end.will_retry
    kinds = [e.type for e in events]
    assert kinds.index("agent_end") < kinds.index("compaction_start")
    assert kinds[-1] == "agent_settled" and kinds.count("agent_start") == 1


async def test_abort_during_manual_compaction(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider(["one", "two"])
    async with session(faux=faux) as fx:
        await fx.session.prompt("hello")
        await fx.session.prompt("again " * 100)  # past the kept tokens: "hello" is summarized
        faux.push(FauxReply(text="summary " * 50, chunk_delay=1))
        await fx.drain()
        failures: list[BaseException] = []

        async def compact() -> None:
            try:
                await fx.session.compact()
            except PitrioError as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(compact)
            await trio.sleep(5)
            assert (await fx.session.state()).is_compacting
            with pytest.raises(PitrioError, match="compaction is in progress"):  # pi 1.6.0
                await fx.session.prompt("meanwhile")
            await fx.session.abort()
        events = await fx.drain()
        entries = await fx.store.entries()
        state = await fx.session.state()
    assert [str(f) for f in failures] == ["Compaction cancelled"]
    end = next(e for e in events if isinstance(e, CompactionEnd))
    assert end.aborted and end.error_message is None
    assert not any(isinstance(e, CompactionEntry) for e in entries)
    assert not state.is_compacting


async def test_model_and_thinking_commands() -> None:
    async with session() as fx:
        with pytest.raises(PitrioError, match=r"^Model not found: faux/nope$"):
            await fx.session.set_model("faux", "nope")
        model = await fx.session.set_model("faux", "faux-think")
        events = await fx.drain()
        assert model.id == "faux-think"
        # pi 1.6.0: no default in the settings, so the session keeps its level ("off" after
        # faux-1, which has no reasoning): no change.
        changed = [e for e in events if isinstance(e, ThinkingLevelChanged)]
        assert changed == []
        assert await fx.session.set_thinking_level("high") == "high"
        assert await fx.session.set_thinking_level("high") == "high"  # unchanged: no event
        assert await fx.session.cycle_thinking_level() == "off"
        assert [e.level for e in await fx.drain() if isinstance(e, ThinkingLevelChanged)] == [
            "high",
            "off",
        ]
        cycled = await fx.session.cycle_model()
        assert cycled is not None and cycled.model.id == "faux-small"
        assert cycled.thinking_level == "off" and not cycled.is_scoped
        entries = await fx.store.entries()
    models = [e.model_id for e in entries if isinstance(e, ModelChangeEntry)]
    levels = [e.thinking_level for e in entries if isinstance(e, ThinkingLevelChangeEntry)]
    assert models == ["faux-1", "faux-think", "faux-small"]
    assert levels == ["off", "high", "off"]


async def test_session_name_and_stats() -> None:
    async with session() as fx:
        with pytest.raises(PitrioError, match=r"^Session name cannot be empty$"):
            await fx.session.set_session_name("   ")
        assert await fx.session.set_session_name("  Demo  ") == "Demo"
        events = await fx.drain()
        await fx.session.prompt("hi")
        stats = await fx.session.session_stats()
        state = await fx.session.state()
    assert SessionInfoChanged(name="Demo") in events
    assert state.session_name == "Demo"
    assert (stats.user_messages, stats.assistant_messages, stats.total_messages) == (1, 1, 2)
    assert stats.tokens["total"] > 0
    assert stats.context_usage is not None and stats.context_usage["contextWindow"] == 128000


async def test_user_bash_is_recorded_and_reaches_the_next_request(tmp_path: Path) -> None:
    async with session() as fx:
        ok = await fx.session.bash("printf 'one\\ntwo\\n'; echo err >&2")
        failed = await fx.session.bash("exit 3")
        updates = [e for e in await fx.drain() if isinstance(e, BashExecutionUpdate)]
        await fx.session.prompt("what happened?")
        sent = fx.faux.last_request.context.messages
        context = await fx.store.context_messages()
    assert (ok.output, ok.exit_code, ok.cancelled, ok.truncated) == (
        "one\ntwo\nerr\n",
        0,
        False,
        False,
    )
    assert failed.exit_code == 3
    assert "".join(u.delta for u in updates) == "one\ntwo\nerr\n"
    bash = [m for m in context if isinstance(m, BashExecutionMessage)]
    assert [b.command for b in bash] == ["printf 'one\\ntwo\\n'; echo err >&2", "exit 3"]
    texts = [text_of(m.content) for m in sent if isinstance(m, UserMessage)]
    assert texts[0].startswith("Ran `printf")
    assert texts[1] == "Ran `exit 3`\n(no output)\n\nCommand exited with code 3"


async def test_abort_bash_kills_the_command(autojump_clock: trio.testing.MockClock) -> None:
    async with session() as fx, trio.open_nursery() as nursery:
        results: list[BashResult] = []

        async def run() -> None:
            results.append(await fx.session.bash("sleep 30"))

        nursery.start_soon(run)
        await trio.sleep(0.5)
        await fx.session.abort_bash()
    assert len(results) == 1 and results[0].cancelled and results[0].exit_code is None


async def test_exports_fork_messages_and_last_text(tmp_path: Path) -> None:
    faux = FauxProvider(["first answer", "second answer"])
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, faux, config=RouterConfig(catalogue=False))
        store = await create_store(
            nursery, str(tmp_path), session_dir_override=str(tmp_path / "s"), persist=True
        )
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=router.stream, model=FAUX_1).run)
        )
        handle = SessionHandle(
            await nursery.start(SessionActor(loop=loop, store=store, router=router).run)
        )
        with pytest.raises(PitrioError, match="Nothing to export yet"):
            await handle.export_html(str(tmp_path / "x.html"))
        await handle.prompt("question one")
        await handle.prompt("question two")
        assert await handle.last_assistant_text() == "second answer"
        forks = await handle.fork_messages()
        assert [text for _, text in forks] == ["question one", "question two"]
        page = await handle.export_html(str(tmp_path / "page.html"))
        linear = await handle.export_jsonl(str(tmp_path / "linear.jsonl"))
        nursery.cancel_scope.cancel()
    body = await trio.Path(page).read_text()
    assert body.startswith("<!doctype html>") and "question two" in body
    lines = [orjson.loads(line) for line in (await trio.Path(linear).read_bytes()).splitlines()]
    assert lines[0]["type"] == "session"
    parents = [line["parentId"] for line in lines[1:]]
    ids = [line["id"] for line in lines[1:]]
    assert parents == [None, *ids[:-1]]


async def test_tree_navigation_with_and_without_a_summary() -> None:
    async with session() as fx:
        await fx.session.prompt("first question")
        await fx.session.prompt("second question")
        entries = await fx.store.entries()
        users = [
            e for e in entries if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
        ]
        second = users[1]
        result = await fx.session.navigate_tree(second.id, summarize=True, label="retry-here")
        context = await fx.store.context_messages()
        labels = await fx.store.labels()
        # Back on the first answer with a summary of what was left; then a plain move.
        plain = await fx.session.navigate_tree(users[0].id)
        after = await fx.store.context_messages()
        with pytest.raises(PitrioError, match="Entry nope not found"):
            await fx.session.navigate_tree("nope")
    assert result.editor_text == "second question"
    assert result.summary_entry is not None
    assert result.summary_entry.parent_id == second.parent_id
    assert result.summary_entry.summary.startswith(
        "The user explored a different conversation branch before returning here."
    )
    assert "Branch summary (scripted)" in result.summary_entry.summary
    assert labels == {result.summary_entry.id: "retry-here"}
    assert isinstance(context[-1], BranchSummaryMessage)
    assert [m.role for m in context] == ["user", "assistant", "branchSummary"]
    assert plain.editor_text == "first question" and plain.summary_entry is None
    assert after == ()


async def test_custom_messages_record_queue_or_trigger_a_turn() -> None:
    faux = FauxProvider(["answer one", "answer two"])
    async with session(faux=faux) as fx:
        note = CustomMessage(custom_type="info", content="just recorded", display=True, timestamp=1)
        await fx.session.send_custom_message(note)
        recorded = await fx.drain()
        later = CustomMessage(
            custom_type="info", content="for the next turn", display=False, timestamp=2
        )
        await fx.session.send_custom_message(later, deliver_as="nextTurn")
        await fx.session.prompt("hello")
        sent = fx.faux.last_request.context.messages
        turn = CustomMessage(custom_type="info", content="start a turn", display=True, timestamp=3)
        await fx.session.send_custom_message(turn, trigger_turn=True)
        await fx.session.wait_for_idle()
        entries = await fx.store.entries()
    assert [e.type for e in recorded] == ["message_start", "message_end", "entry_appended"]
    assert [text_of(m.content) for m in sent] == ["just recorded", "hello", "for the next turn"]
    customs = [e for e in entries if isinstance(e, CustomMessageEntry)]
    assert [c.content for c in customs] == ["just recorded", "for the next turn", "start a turn"]
    assert len(faux.requests) == 2


async def test_a_long_user_bash_output_is_kept_in_a_file_named_as_pis(tmp_path: Path) -> None:
    """Output past the tail kept in the result goes whole to ``pi-bash-<16 hex>.log`` in the
    temporary directory, the name pi gives it (issue 21: it was ``pitrio-bash-``)."""
    from pitrio.actors.session.user_bash import run_user_bash

    result = await run_user_bash("seq 1 200000", str(tmp_path), temp_dir=str(tmp_path))
    assert result.truncated and result.full_output_path is not None
    spilled = Path(result.full_output_path)
    assert spilled.parent == tmp_path
    assert re.fullmatch(r"pi-bash-[0-9a-f]{16}\.log", spilled.name), spilled.name
    assert (await trio.Path(spilled).read_bytes()).splitlines()[-1] == b"200000"
