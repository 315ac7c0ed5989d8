"""The load generator's paced faux model (``PITRIO_FAUX_SCRIPT=load``) and its reply checker."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

import pitrio
from pitrio.actors.model_router.providers.faux_load import (
    STAMP_CHARS,
    STAMP_MODULO,
    TOOL_FILE,
    ChunkChecker,
    LoadFaux,
    LoadRequest,
    chunk_deadline,
    chunk_length,
    chunks_due,
    decode_stamp,
    encode_stamp,
    load_chunk,
    load_prompt,
    monotonic_micros,
    parse_load_prompt,
)
from pitrio.actors.model_router.registry import FAUX_MODELS
from pitrio.messages import TextContent, ToolResultMessage, user_message
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, TextDelta, ToolCallEnd


def reply(count: int, first_us: int = 1_000_000, step_us: int = 20_000) -> list[tuple[str, int]]:
    """``count`` chunks as a provider would hand them off: (text, hand-off time)."""
    return [(load_chunk(i, first_us + i * step_us), first_us + i * step_us) for i in range(count)]


def test_stamps_round_trip_and_wrap() -> None:
    for micros in (0, 1, 63, 64, 123_456_789, STAMP_MODULO - 1, STAMP_MODULO + 5):
        assert decode_stamp(encode_stamp(micros)) == micros % STAMP_MODULO
    assert len(encode_stamp(10**15)) == STAMP_CHARS == 5


def test_chunks_are_six_to_nine_characters() -> None:
    lengths = {len(load_chunk(i, 42)) for i in range(64)}
    assert lengths == {6, 7, 8, 9}
    assert all(len(load_chunk(i, 42)) == chunk_length(i) for i in range(64))


def test_prompts_parse_back() -> None:
    request = LoadRequest(chunks=120, rate=50.0, tool=True)
    assert parse_load_prompt(load_prompt(request)) == request
    assert parse_load_prompt("load") == LoadRequest()
    assert parse_load_prompt("hello load n=3") is None
    assert parse_load_prompt("load n=x") is None


def test_a_whole_reply_checks_with_its_latencies() -> None:
    checker = ChunkChecker()
    for text, sent in reply(30):
        checker.feed(text, sent + 1500)
    assert checker.finish(30, "".join(text for text, _ in reply(30))) == []
    assert checker.latencies_us == [1500] * 30
    assert checker.sent_us == [sent for _, sent in reply(30)]


def test_a_stamp_across_the_wrap_still_measures() -> None:
    checker = ChunkChecker()
    sent = STAMP_MODULO - 10
    checker.feed(load_chunk(0, sent), sent + 25)  # the arrival's stamp has wrapped
    assert checker.finish(1, None) == []
    assert checker.latencies_us == [25]


def test_coalesced_deltas_are_not_faults() -> None:
    chunks = reply(10)
    checker = ChunkChecker()
    # Merged updates: several whole chunks in one delta, all read when it arrives.
    for group in (chunks[0:1], chunks[1:4], chunks[4:9], chunks[9:]):
        checker.feed("".join(text for text, _ in group), group[-1][1] + 100)
    assert checker.finish(10, None) == []
    assert checker.index == 10
    assert checker.latencies_us[1:4] == [40_100, 20_100, 100]


def test_a_missing_chunk_is_caught() -> None:
    chunks = reply(10)
    del chunks[4]
    checker = ChunkChecker()
    for text, sent in chunks:
        checker.feed(text, sent + 10)
    faults = checker.finish(10, None)
    assert len(faults) == 1 and "chunk 4" in faults[0] and "missing or out of order" in faults[0]


def test_chunks_out_of_order_are_caught() -> None:
    chunks = reply(10)
    chunks[2], chunks[3] = chunks[3], chunks[2]
    checker = ChunkChecker()
    for text, sent in chunks:
        checker.feed(text, sent + 10)
    assert any("chunk 2" in fault for fault in checker.finish(10, None))


def test_a_chunk_handed_off_before_the_one_ahead_is_caught() -> None:
    checker = ChunkChecker()
    checker.feed(load_chunk(0, 5_000), 6_000)
    checker.feed(load_chunk(1, 4_000), 6_000)  # right index, but time runs backwards
    assert any("out of order" in fault for fault in checker.finish(2, None))


def test_a_short_reply_and_a_wrong_final_text_are_caught() -> None:
    chunks = reply(5)
    checker = ChunkChecker()
    for text, sent in chunks[:4]:
        checker.feed(text, sent)
    checker.feed(chunks[4][0][:3], chunks[4][1])  # the last chunk cut short
    faults = checker.finish(5, "something else")
    assert "3 characters after chunk 4" in faults
    assert "4 chunks received, 5 sent" in faults
    assert "the final message's text differs from its deltas" in faults


def test_foreign_text_is_caught() -> None:
    checker = ChunkChecker()
    checker.feed("A!!!!", 10)
    assert checker.finish(1, None) != []


async def stream(faux: LoadFaux, ctx: LlmContext) -> list[AssistantMessageEvent]:
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    await faux.stream(FAUX_MODELS[0], ctx, StreamOptions(), send)
    send.close()
    return [event async for event in receive]


@pytest.mark.parametrize("rate", [50.0, 10.0])
def test_a_text_turn_is_paced_and_checks(rate: float) -> None:
    async def main() -> None:
        ctx = LlmContext(
            system_prompt="", messages=(user_message("load n=12 rate=" + str(rate), timestamp=1),)
        )
        started = trio.current_time()
        events = await stream(LoadFaux(), ctx)
        assert trio.current_time() - started == pytest.approx(12 / rate)
        deltas = [e.delta for e in events if isinstance(e, TextDelta)]
        checker = ChunkChecker()
        for delta in deltas:
            checker.feed(delta, 0)
        done = events[-1]
        assert isinstance(done, StreamDone) and done.reason == "stop"
        text = "".join(b.text for b in done.message.content if isinstance(b, TextContent))
        assert checker.finish(12, text) == []

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_chunks_due_counts_what_the_schedule_has_reached() -> None:
    start, interval = 10.0, 0.02
    assert chunks_due(start, interval, 0, 12, start) == 0
    assert chunks_due(start, interval, 0, 12, start + 0.019) == 0
    # The sleep's own deadline counts as due, whatever the float rounding.
    for sent in range(12):
        assert chunks_due(start, interval, sent, 12, chunk_deadline(start, interval, sent)) == 1
    assert chunks_due(start, interval, 2, 12, chunk_deadline(start, interval, 6)) == 5
    assert chunks_due(start, interval, 10, 12, start + 100.0) == 2  # never past the total
    assert chunks_due(start, interval, 12, 12, start + 100.0) == 0


def test_a_late_wake_up_hands_off_every_due_chunk_at_once() -> None:
    async def main() -> None:
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock)
        ctx = LlmContext(
            system_prompt="", messages=(user_message("load n=12 rate=50", timestamp=1),)
        )
        send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(LoadFaux().stream, FAUX_MODELS[0], ctx, StreamOptions(), send)
            await trio.testing.wait_all_tasks_blocked()
            queued = [receive.receive_nowait() for _ in range(2)]  # start, text_start
            assert receive.statistics().current_buffer_used == 0
            # A reader waiting on the stream, as the agent loop does: when it wakes for the
            # first delta of a late wake-up, the others are queued behind it already.
            behind: list[int] = []

            async def read_one() -> None:
                queued.append(await receive.receive())
                behind.append(receive.statistics().current_buffer_used)

            nursery.start_soon(read_one)
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(0.1)  # five intervals late: chunks 0-4 are due when the provider wakes
            await trio.testing.wait_all_tasks_blocked()
            assert behind == [4]  # handed off in one go, not one task switch each
            clock.jump(0.019)  # not yet chunk 5's time
            await trio.testing.wait_all_tasks_blocked()
            assert receive.statistics().current_buffer_used == 4
            clock.jump(0.001)  # on time: chunk 5 alone
            await trio.testing.wait_all_tasks_blocked()
            assert receive.statistics().current_buffer_used == 5
            clock.jump(1.0)
        send.close()
        events = queued + [event async for event in receive]
        deltas = [e.delta for e in events if isinstance(e, TextDelta)]
        assert len(deltas) == 12  # one event per chunk, in order, none merged or lost
        checker = ChunkChecker()
        for delta in deltas:
            checker.feed(delta, monotonic_micros())
        done = events[-1]
        assert isinstance(done, StreamDone)
        text = "".join(b.text for b in done.message.content if isinstance(b, TextContent))
        assert checker.finish(12, text) == []

    trio.run(main, clock=trio.testing.MockClock())


def test_an_abort_between_due_chunks_stops_the_reply() -> None:
    async def main() -> None:
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock)
        ctx = LlmContext(
            system_prompt="", messages=(user_message("load n=50 rate=50", timestamp=1),)
        )
        send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(LoadFaux().stream, FAUX_MODELS[0], ctx, StreamOptions(), send)
                await trio.testing.wait_all_tasks_blocked()
                clock.jump(0.2)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        send.close()
        events = [event async for event in receive]
        assert len([e for e in events if isinstance(e, TextDelta)]) == 10
        assert not any(isinstance(e, StreamDone) for e in events)

    trio.run(main, clock=trio.testing.MockClock())


def test_a_tool_turn_reads_the_file_then_replies() -> None:
    async def main() -> None:
        first = LlmContext(
            system_prompt="", messages=(user_message("load n=3 tool=1", timestamp=1),)
        )
        events = await stream(LoadFaux(), first)
        ends = [e for e in events if isinstance(e, ToolCallEnd)]
        assert [(e.tool_call.name, e.tool_call.arguments) for e in ends] == [
            ("read", {"path": TOOL_FILE})
        ]
        assert isinstance(events[-1], StreamDone) and events[-1].reason == "toolUse"
        result = ToolResultMessage(
            tool_call_id=ends[0].tool_call.id,
            tool_name="read",
            content=(TextContent(text="x"),),
            is_error=False,
            timestamp=2,
        )
        second = LlmContext(system_prompt="", messages=(*first.messages, result))
        events = await stream(LoadFaux(), second)
        assert len([e for e in events if isinstance(e, TextDelta)]) == 3

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_other_prompts_get_the_echo() -> None:
    async def main() -> None:
        events = await stream(
            LoadFaux(), LlmContext(system_prompt="", messages=(user_message("hi", timestamp=1),))
        )
        assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "hi"

    trio.run(main)


def test_the_environment_names_it() -> None:
    assert isinstance(pitrio.default_faux({"PITRIO_FAUX_SCRIPT": "load"}), LoadFaux)


def test_a_chunk_seventeen_seconds_late_reads_as_late_not_out_of_order() -> None:
    # An overloaded daemon delivered chunks 16-17 s late; with a 16.7 s stamp they wrapped and
    # the checker blamed the order. The stamp now holds far longer than any delivery takes.
    checker = ChunkChecker()
    sent = 1_000_000_000
    for index, late_s in enumerate((16.5, 16.8, 17.1)):
        handed = sent + index * 20_000
        checker.feed(load_chunk(index, handed), handed + int(late_s * 1_000_000))
    assert checker.errors == []
    assert [round(ms / 1_000_000, 1) for ms in checker.latencies_us] == [16.5, 16.8, 17.1]
