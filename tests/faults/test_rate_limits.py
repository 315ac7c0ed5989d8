"""429 storms: the vendor refuses with ``retry-after``; retries honour it, capped.

The supervisor waits ``baseDelayMs * 2^(n-1)``, capped by ``maxDelayMs``, raised to the
vendor's ``retry-after`` / ``retry-after-ms``; a retry-after beyond the cap ends the sequence
instead of sleeping (DESIGN §5.4). Every failed attempt stays in the file and leaves the
projection; exhausted retries end with ``auto_retry_end`` success false naming the last attempt
(§5.8). Run on an autojumping ``MockClock`` with the vendor in-process, so the times between
requests are exactly the back-off sleeps.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.model_router.diagnostics import http_status, retry_after_ms
from pitrio.messages.agent import AssistantMessage
from tests.faults.support import (
    Faulted,
    assistant_text,
    fault_session,
    message_entries,
    omitted_ids,
    reopen,
)
from tests.faults.vendor import Act, answer, http_error, running_vendor


def rate_limited(attempt: int, *headers: tuple[str, str]) -> Act:
    """A 429 whose text names the attempt (so the last one can be told apart)."""
    return http_error(
        429,
        {
            "error": {
                "message": f"Rate limit reached for requests (attempt {attempt})",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        headers,
    )


def error_text(attempt: int) -> str:
    return f"429 Rate limit reached for requests (attempt {attempt})"


def gaps(arrivals: list[float]) -> list[float]:
    return [later - earlier for earlier, later in itertools.pairwise(arrivals)]


def failures(faulted: Faulted) -> list[AssistantMessage]:
    return [
        e.message
        for e in faulted.recorder.of("message_end")
        if isinstance(e.message, AssistantMessage) and e.message.stop_reason == "error"
    ]


async def test_a_storm_of_429s_is_ridden_out_honouring_retry_after_and_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    settings = {"retry": {"maxRetries": 5, "baseDelayMs": 1000, "maxDelayMs": 10000}}
    storm = [
        rate_limited(1, ("retry-after", "3")),  # back-off 1 s, raised to 3 s
        rate_limited(2, ("retry-after-ms", "7500")),  # back-off 2 s, raised to 7.5 s
        rate_limited(3, ("retry-after", "1")),  # back-off 4 s is longer: 4 s
        rate_limited(4),  # no header: back-off 8 s
        rate_limited(5),  # back-off 16 s, capped to 10 s
    ]
    async with running_vendor() as vendor:
        vendor.push(*storm, answer("Finally through"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, settings) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
    events = faulted.recorder
    starts = events.of("auto_retry_start")
    assert [(s.attempt, s.max_attempts, s.delay_ms) for s in starts] == [
        (1, 5, 3000),
        (2, 5, 7500),
        (3, 5, 4000),
        (4, 5, 8000),
        (5, 5, 10000),
    ]
    assert [s.error_message for s in starts] == [error_text(n) for n in range(1, 6)]
    # The requests were spaced by exactly those sleeps.
    assert gaps([r.arrived_at for r in vendor.requests]) == pytest.approx(
        [3.0, 7.5, 4.0, 8.0, 10.0]
    )
    (end,) = events.of("auto_retry_end")
    assert end.success and end.attempt == 5
    assert [e.will_retry for e in events.of("agent_end")] == [True] * 5 + [False]
    failed = failures(faulted)
    assert [http_status(m) for m in failed] == [429] * 5
    assert [retry_after_ms(m) for m in failed] == [3000, 7500, 1000, None, None]
    # Kept: all five refusals in the file, none in the projection or in later requests.
    assert path is not None
    entries = message_entries(path, "assistant")
    assert [e["message"].get("errorMessage") for e in entries] == [
        *(error_text(n) for n in range(1, 6)),
        None,
    ]
    assert omitted_ids(path) == {e["id"] for e in entries[:5]}
    assert all(r.assistant_texts() == [] for r in vendor.requests)
    assert await reopen(path, faulted.project) == live
    assert [assistant_text(m) for m in live if isinstance(m, AssistantMessage)] == [
        "Finally through"
    ]


async def test_exhausted_retries_end_unsuccessfully_with_the_last_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    settings = {"retry": {"maxRetries": 2, "baseDelayMs": 1000}}
    async with running_vendor() as vendor:
        vendor.push(*(rate_limited(n, ("retry-after", "2")) for n in (1, 2, 3)))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, settings) as faulted:
            await faulted.session.prompt("question")  # returns: a failed run is not an error
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
    events = faulted.recorder
    assert len(vendor.requests) == 3  # the first try and two retries, no more
    assert gaps([r.arrived_at for r in vendor.requests]) == pytest.approx([2.0, 2.0])
    assert [(s.attempt, s.delay_ms) for s in events.of("auto_retry_start")] == [
        (1, 2000),
        (2, 2000),
    ]
    (end,) = events.of("auto_retry_end")
    assert (end.success, end.attempt, end.final_error) == (False, 2, error_text(3))
    assert [e.will_retry for e in events.of("agent_end")] == [True, True, False]
    assert events.types()[-1] == "agent_settled"
    # Kept: three failures in the file; the last one stays in the context (it is the answer).
    assert path is not None
    entries = message_entries(path, "assistant")
    assert [e["message"]["errorMessage"] for e in entries] == [error_text(n) for n in (1, 2, 3)]
    assert omitted_ids(path) == {entries[0]["id"], entries[1]["id"]}
    assert await reopen(path, faulted.project) == live
    (last,) = [m for m in live if isinstance(m, AssistantMessage)]
    assert last.error_message == error_text(3)


async def test_a_retry_after_beyond_the_cap_ends_the_sequence_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    settings = {"retry": {"maxRetries": 5, "baseDelayMs": 1000, "maxDelayMs": 5000}}
    async with running_vendor() as vendor:
        vendor.push(rate_limited(1, ("retry-after", "2")), rate_limited(2, ("retry-after", "120")))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, settings) as faulted:
            started = trio.current_time()
            await faulted.session.prompt("question")
            finished = trio.current_time()
            await faulted.recorder.wait_for("agent_settled")
    events = faulted.recorder
    assert len(vendor.requests) == 2
    assert [(s.attempt, s.delay_ms) for s in events.of("auto_retry_start")] == [(1, 2000)]
    (end,) = events.of("auto_retry_end")
    assert (end.success, end.attempt, end.final_error) == (False, 1, error_text(2))
    assert finished - started == pytest.approx(2.0)  # the 120 s were never slept
    assert retry_after_ms(failures(faulted)[-1]) == 120000
