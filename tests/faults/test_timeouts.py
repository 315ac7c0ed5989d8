"""A provider that hangs: before the first byte, and mid-stream. The read timeout fires, the
supervisor retries, the retry succeeds. Silence before the response head is first repeated
inside the provider (twice, after 0.5 s and 1 s less jitter, as the vendor SDKs do, when
``retry.provider.maxRetries`` asks for it; pi 1.6.0's default is 0): only a third silent try
reaches the supervisor.

httpx has one limit on silence, its read timeout (``retry.provider.timeoutMs`` in the agent
dir's ``settings.json``): it bounds the wait for the response and every wait between two
reads, so it is the first-byte timeout and the idle timeout at once. httpcore enforces it with
``trio.fail_after``, so these cases run on an autojumping :class:`trio.testing.MockClock`: the
clock jumps only when every task is blocked, the vendor runs in-process (never "slow", only
deliberately silent), and every time below is exact, in virtual seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.model_router.diagnostics import error_name
from pitrio.messages.agent import AssistantMessage
from tests.faults.support import (
    assistant_text,
    fault_session,
    message_entries,
    omitted_ids,
    reopen,
)
from tests.faults.vendor import Act, answer, chunk, running_vendor, text_parts

# retry.baseDelayMs: default 2000
SETTINGS = {"retry": {"provider": {"timeoutMs": 20000, "maxRetries": 2}}}


@pytest.fixture(autouse=True)
def diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases read the failure's class from its diagnostics, which a client asks for."""
    monkeypatch.setenv("PITRIO_PROVIDER_DIAGNOSTICS", "1")


async def test_one_silent_try_is_repeated_inside_the_provider_unseen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_vendor() as vendor:
        vendor.push(Act(ending="silent"), answer("Recovered answer"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, SETTINGS) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
        first, repeat = vendor.requests
    events = faulted.recorder
    assert first.gone_at == pytest.approx(first.arrived_at + 20.0)
    assert 0.375 <= repeat.arrived_at - first.gone_at <= 0.5  # 0.5 s less jitter
    (answered,) = [e.message for e in events.of("message_end") if e.message.role == "assistant"]
    assert isinstance(answered, AssistantMessage) and answered.stop_reason == "stop"
    assert events.of("auto_retry_start") == [] and events.of("auto_retry_end") == []
    assert [e.will_retry for e in events.of("agent_end")] == [False]
    assert [m.role for m in live] == ["system", "user", "assistant"]  # pi 1.6.0


async def test_a_provider_silent_before_the_first_byte_times_out_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    silent = Act(ending="silent")
    async with running_vendor() as vendor:
        vendor.push(silent, silent, silent, answer("Recovered answer"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, SETTINGS) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
        *tries, retry = vendor.requests
    events = faulted.recorder
    # The configured 20 s, from the request to the client giving up (the server saw it go);
    # the provider repeats it twice after its back-off (0.5 s, 1 s, less jitter).
    assert len(tries) == 3
    for one_try in tries:
        assert one_try.gone_at is not None
        assert one_try.gone_at == pytest.approx(one_try.arrived_at + 20.0)
    assert 0.375 <= tries[1].arrived_at - (tries[0].gone_at or 0) <= 0.5
    assert 0.75 <= tries[2].arrived_at - (tries[1].gone_at or 0) <= 1.0
    first = tries[-1]
    failed, recovered = [
        e.message for e in events.of("message_end") if e.message.role == "assistant"
    ]
    assert isinstance(failed, AssistantMessage) and failed.stop_reason == "error"
    assert failed.error_message == "Request timed out."  # pi's text (the SDKs')
    assert failed.content == () and error_name(failed) == "TimeoutError"
    assert failed.diagnostics is not None and failed.diagnostics[0].details == {
        "cause": "Request timed out waiting for the provider: no response in 20 s"
    }
    # Retried after the default back-off, and the retry is answered.
    (start,) = events.of("auto_retry_start")
    assert (start.attempt, start.delay_ms, start.error_message) == (1, 2000, failed.error_message)
    assert retry.arrived_at == pytest.approx(first.gone_at + 2.0)
    (end,) = events.of("auto_retry_end")
    assert end.success and end.attempt == 1
    assert assistant_text(recovered) == "Recovered answer"
    assert retry.assistant_texts() == []  # the failed attempt is not sent back
    # Kept: the failed attempt in the file, out of the projection.
    assert path is not None
    failed_entry, _ = message_entries(path, "assistant")
    assert failed_entry["message"]["errorMessage"] == failed.error_message
    assert omitted_ids(path) == {failed_entry["id"]}
    assert await reopen(path, faulted.project) == live
    assert [m.role for m in live] == ["system", "user", "assistant"]  # pi 1.6.0


async def test_a_stream_that_stalls_times_out_after_the_idle_limit_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # Pauses of 15 s stay under the 20 s limit (it is not a limit on the whole response);
    # then the vendor goes quiet for good.
    stalling = Act(
        parts=[*text_parts("Partial"), 15.0, chunk({"content": " answer"}), 15.0,
               chunk({"content": " so far"})],
        ending="stall",
    )  # fmt: skip
    async with running_vendor() as vendor:
        vendor.push(stalling, answer("The whole answer"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, SETTINGS) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
        first, retry = vendor.requests
    events = faulted.recorder
    # The last byte came 30 s in; the client gave up 20 s of silence later, 50 s in all.
    assert first.gone_at is not None
    assert first.gone_at == pytest.approx(first.arrived_at + 50.0)
    failed, recovered = [
        e.message for e in events.of("message_end") if e.message.role == "assistant"
    ]
    assert isinstance(failed, AssistantMessage) and failed.stop_reason == "error"
    assert failed.error_message == (
        "Request timed out waiting for the provider: the stream stalled for 20 s"
    )
    assert assistant_text(failed) == "Partial answer so far"  # what streamed is kept
    (start,) = events.of("auto_retry_start")
    assert (start.attempt, start.delay_ms) == (1, 2000)
    assert retry.arrived_at == pytest.approx(first.gone_at + 2.0)
    assert [e.success for e in events.of("auto_retry_end")] == [True]
    assert assistant_text(recovered) == "The whole answer"
    assert retry.assistant_texts() == []
    assert path is not None
    failed_entry, kept_entry = message_entries(path, "assistant")
    assert failed_entry["message"]["content"] == [{"type": "text", "text": "Partial answer so far"}]
    assert failed_entry["message"]["stopReason"] == "error"
    assert kept_entry["message"]["content"] == [{"type": "text", "text": "The whole answer"}]
    assert omitted_ids(path) == {failed_entry["id"]}
    assert await reopen(path, faulted.project) == live
    assert [assistant_text(m) for m in live if isinstance(m, AssistantMessage)] == [
        "The whole answer"
    ]
