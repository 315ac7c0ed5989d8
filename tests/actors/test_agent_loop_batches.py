"""The loop hands streamed updates to a batched subscriber (the session's pump) as one item per
wake-up (issue 38): what was queued goes together, a lone delta goes at once, and the events
are those a plain subscriber gets, in the same order."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from pitrio.actors._actor import buffered
from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.agent_loop.commands import LoopFeed, LoopItem, RunEndFacts, UpdateBatch
from pitrio.actors.agent_loop.run import STREAM_BUFFER, UPDATE_BATCH
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.messages.content import text_of
from pitrio.messages.events import AgentEvent, MessageEnd, MessageStart
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, TextDelta

from .conftest import FAUX_1


class ScriptedProvider:
    """A provider the test drives: each step's deltas are queued on the loop's channel at
    once (no checkpoint between them), then it waits for the next step; ``None`` ends it."""

    def __init__(self) -> None:
        self.steps, self._steps = trio.open_memory_channel[list[str] | None](100)
        self.intake: Any = None  # the loop's send end it was given (its StreamIntake)

    async def stream(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        send: trio.MemorySendChannel[AssistantMessageEvent],
    ) -> None:
        self.intake = send
        builder = StreamBuilder.for_model(model)
        send.send_nowait(builder.start())
        send.send_nowait(builder.text_start())
        async for deltas in self._steps:
            if deltas is None:
                break
            for delta in deltas:
                send.send_nowait(builder.text_delta(delta))
        send.send_nowait(builder.text_end())
        send.send_nowait(builder.done())


def taken(feed: trio.MemoryReceiveChannel[Any]) -> list[Any]:
    """Every item queued on ``feed`` now."""
    items: list[Any] = []
    while True:
        try:
            items.append(feed.receive_nowait())
        except trio.WouldBlock:
            return items


def flattened(items: list[LoopItem]) -> list[AgentEvent]:
    """The events of batched items, one by one, without the run-end facts."""
    events: list[AgentEvent] = []
    for item in items:
        if isinstance(item, UpdateBatch):
            events.extend(item.events)
        elif not isinstance(item, RunEndFacts):
            events.append(item)
    return events


def deltas_of(item: LoopItem) -> list[str]:
    assert isinstance(item, UpdateBatch)
    return [
        update.assistant_message_event.delta
        for update in item.events
        if isinstance(update.assistant_message_event, TextDelta)
    ]


async def test_queued_deltas_go_in_one_batch_and_a_lone_delta_at_once() -> None:
    provider = ScriptedProvider()
    async with trio.open_nursery() as nursery:
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=provider.stream, model=FAUX_1).run)
        )
        feed = await loop.subscribe_batched(capacity=1000)
        assert isinstance(feed, LoopFeed)
        plain = await loop.subscribe(capacity=100_000)
        nursery.start_soon(loop.prompt, "hi")
        await trio.testing.wait_all_tasks_blocked()
        # Up to the provider's first wait: the prompt's events, the response's start, and its
        # text_start as a batch of one, not held back while the provider is still open.
        head = taken(feed.events)
        assert isinstance(head[-2], MessageStart) and head[-2].message.role == "assistant"
        last = head[-1]
        assert isinstance(last, UpdateBatch) and len(last.events) == 1
        assert last.events[0].assistant_message_event.type == "text_start"

        await provider.steps.send(["a", "b", "c", "d", "e"])  # queued before the loop runs
        await trio.testing.wait_all_tasks_blocked()
        five = taken(feed.events)
        assert len(five) == 1 and deltas_of(five[0]) == ["a", "b", "c", "d", "e"]

        await provider.steps.send(["z"])  # a lone delta, the stream still open
        await trio.testing.wait_all_tasks_blocked()
        lone = taken(feed.events)
        assert len(lone) == 1 and deltas_of(lone[0]) == ["z"]

        many = [f"{n} " for n in range(UPDATE_BATCH + 10)]  # more than one batch holds
        assert len(many) < STREAM_BUFFER
        await provider.steps.send(many)
        await trio.testing.wait_all_tasks_blocked()
        split = taken(feed.events)
        assert [len(deltas_of(item)) for item in split] == [UPDATE_BATCH, 10]
        assert deltas_of(split[0]) + deltas_of(split[1]) == many

        await provider.steps.send(None)
        await trio.testing.wait_all_tasks_blocked()
        tail = taken(feed.events)
        assert isinstance(tail[0], UpdateBatch)  # text_end, then the message's end
        assert isinstance(tail[1], MessageEnd)
        assert any(isinstance(item, RunEndFacts) for item in tail)

        items = head + five + lone + split + tail
        # The same events as a plain subscriber's, in the same order, and counted as sent.
        assert flattened(items) == taken(plain)
        assert feed.sent.value == len(flattened(items)) + 1  # and the run-end facts
        nursery.cancel_scope.cancel()


class StepNames(trio.abc.Instrument):
    """The names of the tasks that took a step while it was on."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.names.add(task.name)


async def test_a_lone_delta_goes_out_in_the_providers_task_and_a_burst_in_batches() -> None:
    """The provider → loop hop (``.intake``, issue 38): while the loop waits on the empty
    stream channel and its lone batched subscriber's channel is empty, a delta is emitted in
    the provider's task (a task of the loop's run nursery), with no step of the loop's own
    task; what comes while the subscriber has not taken that goes through the loop, queued
    deltas in one batch. The aborted message is built from the partial the loop holds."""
    provider = ScriptedProvider()
    async with trio.open_nursery() as nursery:
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=provider.stream, model=FAUX_1).run)
        )
        feed = await loop.subscribe_batched(capacity=1000)
        nursery.start_soon(loop.prompt, "hi")
        await trio.testing.wait_all_tasks_blocked()
        head = taken(feed.events)
        assert isinstance(head[-2], MessageStart)

        steps = StepNames()
        trio.lowlevel.add_instrument(steps)
        try:
            await provider.steps.send(["a"])
            await trio.testing.wait_all_tasks_blocked()
        finally:
            trio.lowlevel.remove_instrument(steps)
        this = trio.lowlevel.current_task().name
        assert {name.rsplit(".", 1)[-1] for name in steps.names - {this}} == {"_run_stream"}
        assert [deltas_of(item) for item in taken(feed.events)] == [["a"]]

        # A burst: the first delta at once, the rest (queued while the subscriber's channel
        # holds it) through the loop's wake-up, as one batch.
        await provider.steps.send(["b", "c", "d"])
        await trio.testing.wait_all_tasks_blocked()
        burst = taken(feed.events)
        assert [deltas_of(item) for item in burst] == [["b"], ["c", "d"]]
        assert feed.sent.value == len(flattened(head)) + 4

        await loop.abort()
        await trio.testing.wait_all_tasks_blocked()
        ends = [item for item in taken(feed.events) if isinstance(item, MessageEnd)]
        assert [text_of(end.message.content) for end in ends] == ["abcd"]
        nursery.cancel_scope.cancel()


class IntakeWatch(trio.abc.Instrument):
    """Fails a step that ends with the direct intake open while the stream channel holds
    events: the provider's next delta would be emitted ahead of them."""

    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider
        self.broken: list[str] = []

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        intake = self.provider.intake
        if intake is not None and intake.take_now is not None and buffered(intake.channel):
            self.broken.append(task.name)


async def test_the_direct_intake_opens_only_when_the_loop_waits_on_an_empty_channel() -> None:
    """The loop waited for its subscriber with a batch while the provider queued more
    deltas; once the subscriber takes, the loop goes back to the channel. It must take what
    was queued before it opens the direct intake: opened first, the loop's ``receive`` takes
    one queued delta and yields, and the provider's next delta overtakes the rest (found by
    the daemon's stalled-client test: one delta ahead of up to 64 others)."""
    provider = ScriptedProvider()
    watch = IntakeWatch(provider)
    async with trio.open_nursery() as nursery:
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=provider.stream, model=FAUX_1).run)
        )
        feed = await loop.subscribe_batched(capacity=1)
        nursery.start_soon(loop.prompt, "hi")
        items: list[Any] = []
        while not (items and isinstance(items[-1], UpdateBatch)):  # up to the text_start
            items.append(await feed.events.receive())
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.add_instrument(watch)
        try:
            # "b" goes at once and fills the subscriber's channel; "c" and "d" go through
            # the loop, which waits to hand them over; "e" and "f" queue meanwhile.
            await provider.steps.send(["b", "c", "d"])
            await trio.testing.wait_all_tasks_blocked()
            await provider.steps.send(["e", "f"])
            await trio.testing.wait_all_tasks_blocked()
            items += taken(feed.events)  # "b", then "c" and "d": the loop resumes
            await trio.testing.wait_all_tasks_blocked()
            await provider.steps.send(["g"])
            await trio.testing.wait_all_tasks_blocked()
            items += taken(feed.events)
        finally:
            trio.lowlevel.remove_instrument(watch)
        assert watch.broken == []
        deltas = [
            event.assistant_message_event.delta
            for event in flattened(items)
            if isinstance(getattr(event, "assistant_message_event", None), TextDelta)
        ]
        assert deltas == ["b", "c", "d", "e", "f", "g"]
        nursery.cancel_scope.cancel()
