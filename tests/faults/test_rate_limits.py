"""429 storms: the vendor refuses with ``retry-after``; retries honour it, capped.

Each request is first repeated twice inside the provider, after the vendor's ``retry-after``
(as the vendor SDKs pi uses do, with ``retry.provider.maxRetries`` 2; pi 1.6.0's default is 0):
only every third refusal reaches the session. The supervisor then waits
``baseDelayMs * 2^(n-1)``, capped by ``maxAgentDelayMs``, raised to the last refusal's
``retry-after`` / ``retry-after-ms`` (read from the message's diagnostics, which these cases
ask for); a retry-after beyond the cap ends the sequence instead of sleeping (DESIGN §5.4).
Every failed attempt stays in the file and leaves the projection; exhausted retries end with
``auto_retry_end`` success false naming the last attempt (§5.8). Run on an autojumping
``MockClock`` with the vendor in-process, so the times between requests are exactly the
back-off sleeps.
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
    # pi 1.6.0's completions text: the status, then the parsed error body as compact JSON.
    return (
        f'429: {{"message":"Rate limit reached for requests (attempt {attempt})",'
        '"type":"requests","code":"rate_limit_exceeded"}'
    )


@pytest.fixture(autouse=True)
def diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor reads retry-after from diagnostics, which a client asks for."""
    monkeypatch.setenv("PITRIO_PROVIDER_DIAGNOSTICS", "1")


def session_attempt(attempt: int, *headers: tuple[str, str]) -> list[Act]:
    """The three refusals of one attempt the session sees: two the provider repeats after a
    second, then the one that reaches the session (with ``headers``); the texts count every
    request."""
    first = 3 * attempt - 2
    return [
        rate_limited(first, ("retry-after", "1")),
        rate_limited(first + 1, ("retry-after", "1")),
        rate_limited(first + 2, *headers),
    ]


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
    settings = {
        "retry": {
            "maxRetries": 5,
            "baseDelayMs": 1000,
            "maxAgentDelayMs": 10000,
            "provider": {"maxRetries": 2},
        }
    }
    storm = [
        *session_attempt(1, ("retry-after", "3")),  # back-off 1 s, raised to 3 s
        *session_attempt(2, ("retry-after-ms", "7500")),  # back-off 2 s, raised to 7.5 s
        *session_attempt(3, ("retry-after", "1")),  # back-off 4 s is longer: 4 s
        *session_attempt(4),  # no header: back-off 8 s
        *session_attempt(5),  # back-off 16 s, capped to 10 s
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
    assert [s.error_message for s in starts] == [error_text(3 * n) for n in range(1, 6)]
    # The requests were spaced by exactly those sleeps, each after the provider's two repeats.
    assert gaps([r.arrived_at for r in vendor.requests]) == pytest.approx(
        [1.0, 1.0, 3.0, 1.0, 1.0, 7.5, 1.0, 1.0, 4.0, 1.0, 1.0, 8.0, 1.0, 1.0, 10.0]
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
        *(error_text(3 * n) for n in range(1, 6)),
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
    settings = {"retry": {"maxRetries": 2, "baseDelayMs": 1000, "provider": {"maxRetries": 2}}}
    async with running_vendor() as vendor:
        vendor.push(*(rate_limited(n, ("retry-after", "2")) for n in range(1, 10)))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, settings) as faulted:
            await faulted.session.prompt("question")  # returns: a failed run is not an error
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
    events = faulted.recorder
    # The first try and two retries, no more; each of them a request and two repeats.
    assert len(vendor.requests) == 9
    assert gaps([r.arrived_at for r in vendor.requests]) == pytest.approx([2.0] * 8)
    assert [(s.attempt, s.delay_ms) for s in events.of("auto_retry_start")] == [
        (1, 2000),
        (2, 2000),
    ]
    (end,) = events.of("auto_retry_end")
    assert (end.success, end.attempt, end.final_error) == (False, 2, error_text(9))
    assert [e.will_retry for e in events.of("agent_end")] == [True, True, False]
    assert events.types()[-1] == "agent_settled"
    # Kept: three failures in the file; the last one stays in the context (it is the answer).
    assert path is not None
    entries = message_entries(path, "assistant")
    assert [e["message"]["errorMessage"] for e in entries] == [error_text(n) for n in (3, 6, 9)]
    assert omitted_ids(path) == {entries[0]["id"], entries[1]["id"]}
    assert await reopen(path, faulted.project) == live
    (last,) = [m for m in live if isinstance(m, AssistantMessage)]
    assert last.error_message == error_text(9)


async def test_a_retry_after_beyond_the_cap_ends_the_sequence_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    settings = {
        "retry": {
            "maxRetries": 5,
            "baseDelayMs": 1000,
            "maxAgentDelayMs": 5000,
            "provider": {"maxRetries": 2},
        }
    }
    async with running_vendor() as vendor:
        vendor.push(
            *session_attempt(1, ("retry-after", "2")), *session_attempt(2, ("retry-after", "120"))
        )
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, settings) as faulted:
            started = trio.current_time()
            await faulted.session.prompt("question")
            finished = trio.current_time()
            await faulted.recorder.wait_for("agent_settled")
    events = faulted.recorder
    assert len(vendor.requests) == 6
    assert [(s.attempt, s.delay_ms) for s in events.of("auto_retry_start")] == [(1, 2000)]
    (end,) = events.of("auto_retry_end")
    assert (end.success, end.attempt, end.final_error) == (False, 1, error_text(6))
    # Two repeats of a second in each attempt and the 2 s between them: the 120 s were never
    # slept.
    assert finished - started == pytest.approx(1.0 + 1.0 + 2.0 + 1.0 + 1.0)
    assert retry_after_ms(failures(faulted)[-1]) == 120000


async def test_a_single_500_is_absorbed_by_the_provider_when_it_is_asked_to_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    busy = {"error": {"message": "The server had an error", "type": "server_error"}}
    settings = {"retry": {"provider": {"maxRetries": 1}}}
    async with running_vendor() as vendor:
        vendor.push(http_error(500, busy), answer("Through at once"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, settings) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            path = faulted.session.session_file
    events = faulted.recorder
    (gap,) = gaps([r.arrived_at for r in vendor.requests])
    assert 0.375 <= gap <= 0.5  # the SDKs' first back-off, 0.5 s less up to a quarter
    assert failures(faulted) == []
    assert events.of("auto_retry_start") == [] and events.of("auto_retry_end") == []
    assert [e.will_retry for e in events.of("agent_end")] == [False]
    assert vendor.requests[0].body == vendor.requests[1].body  # the same request again
    assert path is not None
    assert [e["message"]["stopReason"] for e in message_entries(path, "assistant")] == ["stop"]


async def test_a_single_500_reaches_the_client_and_the_session_retries_it_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """pi 1.6.0: no provider-level retry by default, so the 500 is an error message, a
    ``willRetry`` run end, ``auto_retry_start`` after the default 2 s back-off, and the
    failed attempt omitted from the context (kept in the file)."""
    busy = {"error": {"message": "The server had an error", "type": "server_error"}}
    async with running_vendor() as vendor:
        vendor.push(http_error(500, busy), answer("Through after a retry"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, {}) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            path = faulted.session.session_file
    events = faulted.recorder
    (gap,) = gaps([r.arrived_at for r in vendor.requests])
    assert gap == pytest.approx(2.0)  # the agent-level back-off, no provider repeat
    (failed,) = failures(faulted)
    assert (
        failed.error_message == '500: {"message":"The server had an error","type":"server_error"}'
    )
    (start,) = events.of("auto_retry_start")
    assert (start.attempt, start.max_attempts, start.delay_ms) == (1, 3, 2000)
    (end,) = events.of("auto_retry_end")
    assert (end.success, end.attempt) == (True, 1)
    assert [e.will_retry for e in events.of("agent_end")] == [True, False]
    assert path is not None
    entries = message_entries(path, "assistant")
    assert [e["message"]["stopReason"] for e in entries] == ["error", "stop"]
    assert omitted_ids(path) == {entries[0]["id"]}
