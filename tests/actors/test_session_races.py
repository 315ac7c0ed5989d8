"""Races pi users reported, forced deterministically: every command answered, nothing lost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
import trio.testing

from pitrio.actors.model_router import (
    FauxProvider,
    FauxReply,
    FauxToolCall,
)
from pitrio.actors.session.commands import Prompt
from pitrio.actors.supervisor.compaction import CompactionSettings
from pitrio.actors.tool_executor import AgentTool, UpdateFn
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentToolResult, AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.events import AgentSessionEvent, CompactionEnd, MessageStart
from tests.actors.session_harness import FAUX_SMALL, Fixture, session
from tests.actors.session_harness import FIXTURE_SETTINGS as SETTINGS


def user_texts(events: list[AgentSessionEvent]) -> list[str]:
    return [
        text_of(e.message.content)
        for e in events
        if isinstance(e, MessageStart) and isinstance(e.message, UserMessage)
    ]


async def on_agent_end(fx: Fixture, act: Callable[[], Awaitable[None]], done: trio.Event) -> None:
    """A client that reacts to the first ``agent_end`` (the run has no turn left, but has not
    settled) by calling ``act``."""
    async for item in fx.events:
        if item.event.type == "agent_end":
            await act()
            done.set()
            return


async def test_a_follow_up_sent_during_compaction_is_delivered_in_the_same_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """pi #7150: a prompt during an in-flight compaction is neither lost nor run twice."""
    settings = attrs.evolve(
        SETTINGS, compaction=CompactionSettings(keep_recent_tokens=60, reserve_tokens=18_500)
    )
    slow_summary = FauxReply(text="## Goal\nsummary", chunk_delay=1)
    faux = FauxProvider(["hi", "big answer", slow_summary, "answer to the follow-up"])
    async with session(faux, model=FAUX_SMALL, settings=settings) as fx:
        # A first turn for the compaction to summarize: pi 1.6.0 does not start a threshold
        # compaction of a one-turn session (nothing to compact; no compaction_start).
        await fx.session.prompt("hello")
        await fx.drain()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "x " * 4_000)
            await trio.sleep(0.5)  # the summary request is streaming now
            assert (await fx.session.state()).is_compacting
            # (A plain prompt here is accepted and runs after the settle, as pi accepts it:
            # test_a_prompt_during_a_threshold_compaction_runs_after_it_and_the_settle.)
            await fx.session.prompt("meanwhile", streaming_behavior="followUp")
        events = await fx.drain()
    kinds = [e.type for e in events]
    assert kinds.count("agent_settled") == 1 and kinds[-1] == "agent_settled"
    assert user_texts(events).count("meanwhile") == 1
    end = next(e for e in events if isinstance(e, CompactionEnd))
    assert end.result is not None
    assert kinds.index("compaction_end") < len(kinds) - 1 - kinds[::-1].index("agent_start")


async def test_a_prompt_during_a_threshold_compaction_runs_after_it_and_the_settle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 21: a plain prompt sent while the post-run threshold compaction runs (a client
    reacting to ``compaction_start``; pi is idle then and accepts it) is accepted, not told
    the agent is busy, and runs as the next run once the compaction ended and the run
    settled; the summary is the compaction's, the prompt is run once."""
    settings = attrs.evolve(
        SETTINGS, compaction=CompactionSettings(keep_recent_tokens=60, reserve_tokens=18_500)
    )
    # The summary streams over seconds of the mock clock: the compaction is still open when
    # the prompt, sent from the compaction_start handler, reaches the session.
    slow_summary = FauxReply(text="## Goal\nsummary", chunk_delay=1)
    faux = FauxProvider(["hi", "big answer", slow_summary, "answer to the second"])
    async with session(faux, model=FAUX_SMALL, settings=settings) as fx:
        # A first turn for the compaction to summarize: pi 1.6.0 does not start a threshold
        # compaction of a one-turn session (nothing to compact; no compaction_start), and a
        # test waiting for one would wait forever (a busy spin under the autojump clock).
        await fx.session.prompt("hello")
        await fx.drain()
        outcome: list[BaseException | None] = []
        during: list[bool] = []
        sent = trio.Event()

        async def on_compaction_start() -> None:
            async for item in fx.events:
                if item.event.type == "compaction_start":
                    during.append((await fx.session.state()).is_compacting)
                    try:
                        await fx.session.submit("second prompt")  # returns at acceptance
                    except PitrioError as exc:
                        outcome.append(exc)
                    else:
                        outcome.append(None)
                    sent.set()
                    return

        # Bounded: should the compaction never start, fail instead of waiting forever.
        with trio.fail_after(600):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(on_compaction_start)
                await fx.session.prompt("x " * 4_000)
                await sent.wait()
            await fx.session.wait_for_idle()
        events = await fx.drain()
        context = await fx.store.context_messages()
    assert outcome == [None]
    assert during == [True]
    kinds = [e.type for e in events]
    end = next(e for e in events if isinstance(e, CompactionEnd))
    assert end.reason == "threshold" and end.result is not None
    assert end.result.summary.startswith("## Goal")
    assert kinds.count("agent_settled") == 2 and kinds[-1] == "agent_settled"
    second_start = len(kinds) - 1 - kinds[::-1].index("agent_start")
    assert kinds.index("compaction_end") < kinds.index("agent_settled") < second_start
    assert user_texts(events).count("second prompt") == 1
    assert [text_of(m.content) for m in context if isinstance(m, AssistantMessage)][-1] == (
        "answer to the second"
    )


async def test_manual_compact_during_overflow_recovery_is_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """pi #7086: a manual compact arriving while overflow recovery runs."""
    overflow = FauxReply(error="prompt is too long: 250000 tokens > 128000 maximum")
    slow_summary = FauxReply(text="## Goal\nrecovery", chunk_delay=1)
    faux = FauxProvider(["hello", overflow, slow_summary, "unused", "## Goal\nmanual"])
    async with session(faux) as fx:
        await fx.session.prompt("hello")
        await fx.drain()
        outcome: list[str] = []

        async def manual() -> None:
            try:
                result = await fx.session.compact()
                outcome.append(result.summary)
            except PitrioError as exc:
                outcome.append(f"error: {exc}")

        # Past the 60 kept tokens by itself, so the recovery has "hello" to summarize (pi
        # 1.6.0 starts no compaction of a session that fits the kept budget).
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "OVERFLOW please " + "padding " * 40)
            await trio.sleep(0.5)
            assert (await fx.session.state()).is_compacting
            nursery.start_soon(manual)
        events = await fx.drain()
        state = await fx.session.state()
    assert len(outcome) == 1  # answered, one way or the other
    assert not state.is_running and not state.is_compacting
    assert [e.type for e in events].count("agent_settled") == 1


async def test_abort_while_tools_run(autojump_clock: trio.testing.MockClock) -> None:
    started = trio.Event()

    async def slow(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        started.set()
        await trio.sleep(30)
        raise AssertionError("not reached")

    tool = AgentTool(name="slow", execute=slow)
    faux = FauxProvider([FauxReply(tool_calls=[FauxToolCall("slow", {})])])
    async with session(faux, tools=(tool,)) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "run the tool")
            await started.wait()
            await fx.session.abort()
        events = await fx.drain()
        context = await fx.store.context_messages()
    assert trio.current_time() < 30
    result = next(m for m in context if isinstance(m, ToolResultMessage))
    assert (text_of(result.content), result.is_error) == ("Operation aborted", True)
    kinds = [e.type for e in events]
    # The run's last acknowledgements come between its agent_end and its settle.
    assert kinds[-1] == "agent_settled"
    tail = [kind for kind in kinds if kind != "entry_appended"][-2:]
    assert tail == ["agent_end", "agent_settled"]


async def test_a_steer_just_after_the_last_turn_is_delivered_not_dropped() -> None:
    """A steer racing the end of a run is delivered exactly once: in that run if it arrives
    before the run settles, else right after the next prompt (pi: it waits in the queue)."""
    faux = FauxProvider(["first answer", "answer to the late steer", "third", "fourth"])
    async with session(faux) as fx:
        steered = trio.Event()

        async def steer() -> None:
            await fx.session.steer("late steer")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_agent_end, fx, steer, steered)
            await fx.session.prompt("go")
        await steered.wait()
        await fx.session.wait_for_idle()
        await fx.session.prompt("next prompt")
        context = await fx.store.context_messages()
        state = await fx.session.state()
    texts = [text_of(m.content) for m in context if isinstance(m, UserMessage)]
    assert texts.count("late steer") == 1
    if texts.index("late steer") > texts.index("next prompt"):
        # Delivered by the next run: right after its prompt, before the model answered it.
        assert texts[texts.index("next prompt") + 1] == "late steer"
    assert state.steering == () and state.agent.steering == ()


async def test_a_hundred_prompts_racing_are_serialised_in_arrival_order() -> None:
    faux = FauxProvider()  # echoes
    async with session(faux) as fx:
        async with trio.open_nursery() as nursery:
            await fx.session.submit("prompt 0")
            for index in range(1, 100):
                # Sent one after another from one task: arrival order is index order.
                await fx.session.submit(f"prompt {index}", streaming_behavior="followUp")
        await fx.session.wait_for_idle()
        events = await fx.drain()
        context = await fx.store.context_messages()
        nursery.cancel_scope.cancel()
    delivered = user_texts(events)
    assert delivered == [f"prompt {i}" for i in range(100)]
    assert [e.type for e in events].count("agent_settled") == 1
    assert sum(1 for m in context if isinstance(m, UserMessage)) == 100


async def test_a_prompt_sent_on_agent_end_runs_after_the_settle_not_refused() -> None:
    """A client that sends its next prompt as soon as it reads ``agent_end`` (what pi's clients
    do: pi is idle then) gets it run as the next run, after ``agent_settled``; the run that
    ended is not told it is busy (DESIGN §3: commands arriving while the run settles are
    deferred, answered right after the settle)."""
    faux = FauxProvider(["first answer", "second answer"])
    async with session(faux) as fx:
        answered = trio.Event()
        outcome: list[BaseException | None] = []

        async def prompt() -> None:
            try:
                # ``submit`` returns at acceptance: the first run has not settled.
                await fx.session.submit("second prompt")
            except PitrioError as exc:
                outcome.append(exc)
            else:
                outcome.append(None)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_agent_end, fx, prompt, answered)
            await fx.session.prompt("first prompt")
            await answered.wait()
        await fx.session.wait_for_idle()
        events = await fx.drain()
        context = await fx.store.context_messages()
    assert outcome == [None]
    texts = [(m.role, text_of(m.content)) for m in context if isinstance(m, UserMessage)]
    assert texts == [("user", "first prompt"), ("user", "second prompt")]
    assert [text_of(m.content) for m in context if isinstance(m, AssistantMessage)] == [
        "first answer",
        "second answer",
    ]
    assert len(context) == 4
    kinds = [e.type for e in events]
    # The second run starts after the first settled: runs never overlap.
    assert kinds.count("agent_settled") == 2 and kinds[-1] == "agent_settled"
    second_start = len(kinds) - 1 - kinds[::-1].index("agent_start")
    assert kinds.index("agent_settled") < second_start


async def test_a_prompt_aborted_in_its_preflight_is_answered_and_settles_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Found by ``pitrio explore`` (a prompt and an abort sent together): the abort reached
    the run while its preflight ran, before the prompt was answered; the prompt's answer never
    came and its sender waited for ever. The prompt is now answered, and its run settles as
    aborted without having started (pi would still run the agent once: the abort is kept)."""
    async with session(FauxProvider(["not asked"])) as fx:
        accepted = fx.session.new_reply()
        settled = fx.session.new_reply()
        await fx.session.tell(Prompt("hello", (), None, accepted, settled, True, "interactive"))
        await fx.session.abort()
        with trio.fail_after(60):
            assert (await accepted.wait()).disposition == "started"
            await settled.wait()
        events = await fx.drain()
        assert not (await fx.session.state()).is_running
    assert [e.type for e in events] == ["agent_settled"]
    assert getattr(events[0], "aborted", None) is True


async def test_a_step_whose_lender_was_aborted_is_not_started_in_its_closed_nursery(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Found by ``pitrio explore`` (random-clients-wide, PCT seed 9590): an abort reached a run
    while its retry's ``CarryOut`` waited in the supervisor's inbox; the run's lent nursery
    closed, then the supervisor took the command and started the step in it: "Nursery is
    closed to new arrivals" crashed the supervisor, and the session with it. A step whose
    lender is gone is now answered as abandoned and not started."""
    from pitrio.actors.supervisor.actor.commands import CarryOut, Lent
    from pitrio.actors.supervisor.actor.shell import STEP_ABANDONED
    from pitrio.actors.supervisor.decisions import Retry
    from pitrio.messages.events import AutoRetryStart
    from tests.actors.test_supervisor_support import failed

    async with session(FauxProvider(["still here"])) as fx:

        async def supervisor_of(actor: Any) -> Any:
            return actor.supervisor

        supervisor = await fx.session.invoke(supervisor_of)
        async with trio.open_nursery() as gone:
            pass  # the lender's nursery: closed
        scope = trio.CancelScope()
        scope.cancel()  # the lender was aborted
        error = "503 Service Unavailable"
        event = AutoRetryStart(attempt=1, max_attempts=2, delay_ms=10, error_message=error)
        retry = Retry(attempt=1, delay_ms=10, failed=failed(error), event=event)
        reply = supervisor.new_reply()
        await supervisor.tell(CarryOut(retry, None, scope, Lent(gone, scope), reply))
        with trio.fail_after(5):
            try:
                await reply.wait()
            except PitrioError as exc:
                assert str(exc) == STEP_ABANDONED
            else:
                raise AssertionError("the abandoned step was carried out")
        await fx.session.prompt("are you there?")  # the session still answers
        assert await fx.session.last_assistant_text() == "still here"
