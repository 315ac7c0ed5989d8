"""The vendor breaks the stream: a TCP reset mid-answer, a body cut short, malformed SSE.

A reset or a cut-short body is transient: the answer ends as an error message naming the
problem (what streamed before it is kept), the supervisor retries, the retry succeeds, and the
file keeps the failed attempt while the projection leaves it out. Malformed data is not
transient: a clear error message ends the run, nothing is raised out of the session, and the
next prompt works.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from pitrio.actors.model_router.diagnostics import error_name
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.events import MessageUpdate
from tests.faults.mock_llm import MOCK_LLM, mock_llm, resetting_proxy
from tests.faults.support import (
    Faulted,
    assistant_text,
    fault_session,
    message_entries,
    omitted_ids,
    reopen,
)
from tests.faults.vendor import (
    Act,
    answer,
    chunk,
    running_vendor,
    text_parts,
    text_tail,
)

QUICK_RETRY = {"retry": {"baseDelayMs": 1}}


@pytest.fixture(autouse=True)
def diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases read the failure's class from its diagnostics, which a client asks for."""
    monkeypatch.setenv("PITRIO_PROVIDER_DIAGNOSTICS", "1")


def _shows(text: str) -> Callable[[object], bool]:
    """A predicate: a ``message_update`` whose partial answer reads ``text``."""

    def check(event: object) -> bool:
        return isinstance(event, MessageUpdate) and assistant_text(event.message) == text

    return check


def _answers(faulted: Faulted) -> list[AssistantMessage]:
    return [
        e.message
        for e in faulted.recorder.of("message_end")
        if isinstance(e.message, AssistantMessage)
    ]


async def _assert_failed_attempt_kept_but_omitted(
    faulted: Faulted, path: Path | None, live: tuple[AgentMessage, ...], partial: str
) -> None:
    assert path is not None
    failed_entry, kept_entry = message_entries(path, "assistant")
    assert failed_entry["message"]["stopReason"] == "error"
    assert failed_entry["message"]["content"] == [{"type": "text", "text": partial}]
    assert kept_entry["message"]["stopReason"] == "stop"
    assert omitted_ids(path) == {failed_entry["id"]}
    assert await reopen(path, faulted.project) == live
    # pi 1.6.0: a session's first message is its system message.
    assert [m.role for m in live] == ["system", "user", "assistant"]


async def test_a_reset_mid_stream_is_reported_retried_and_omitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = trio.Event()  # the vendor resets once the session has shown the partial answer
    async with running_vendor() as vendor:
        vendor.push(
            Act(parts=[*text_parts("Partial ", "answer"), cut], ending="reset"),
            answer("The whole answer"),
        )
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, QUICK_RETRY) as faulted:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(faulted.session.prompt, "question")
                await faulted.recorder.wait_until(_shows("Partial answer"))
                cut.set()
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
        retry = vendor.requests[1]
    failed, recovered = _answers(faulted)
    assert failed.stop_reason == "error" and error_name(failed) == "ConnectionError"
    assert failed.error_message is not None
    assert failed.error_message.startswith("Connection error: ")
    assert failed.error_message.endswith("[Errno 104] Connection reset by peer")
    assert assistant_text(failed) == "Partial answer"
    (start,) = faulted.recorder.of("auto_retry_start")
    assert (start.attempt, start.error_message) == (1, failed.error_message)
    (end,) = faulted.recorder.of("auto_retry_end")
    assert end.success and end.attempt == 1
    assert assistant_text(recovered) == "The whole answer"
    assert retry.user_texts() == ["question"] and retry.assistant_texts() == []
    await _assert_failed_attempt_kept_but_omitted(faulted, path, live, "Partial answer")


@pytest.mark.skipif(not MOCK_LLM.exists(), reason="../shared/tools/mock_llm.py is not here")
async def test_the_mock_llm_subprocess_reset_mid_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through a real vendor process: the shared mock LLM streams slowly (a long
    pause after its first delta), the proxy in front of it resets the session's connection."""
    script = {
        "queue": [
            {"kind": "text", "deltas": 3, "delta_text": "Slow ", "delay": 30},
            {"kind": "text", "text": "Second time lucky", "deltas": 2},
        ]
    }
    async with (
        mock_llm(script, tmp_path) as port,
        resetting_proxy(port) as proxy,
        fault_session(tmp_path, monkeypatch, proxy.base_url, QUICK_RETRY) as faulted,
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(faulted.session.prompt, "question")
            await faulted.recorder.wait_until(_shows("Slow "))
            assert proxy.reset() == 1
        await faulted.recorder.wait_for("agent_settled")
        live = await faulted.session.messages()
        path = faulted.session.session_file
    failed, recovered = _answers(faulted)
    assert failed.stop_reason == "error"
    assert failed.error_message is not None
    assert failed.error_message.startswith("Connection error: ")
    assert failed.error_message.endswith("[Errno 104] Connection reset by peer")
    assert [e.success for e in faulted.recorder.of("auto_retry_end")] == [True]
    assert assistant_text(recovered) == "Second time lucky"
    assert proxy.connections == 2  # the retry opened a fresh connection
    await _assert_failed_attempt_kept_but_omitted(faulted, path, live, "Slow ")


async def test_a_body_cut_short_is_reported_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vendor ends the body properly but without a finish reason or ``[DONE]``."""
    async with running_vendor() as vendor:
        vendor.push(Act(parts=text_parts("Half an")), answer("A whole answer"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, QUICK_RETRY) as faulted:
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            live = await faulted.session.messages()
            path = faulted.session.session_file
    failed, recovered = _answers(faulted)
    assert failed.error_message == (
        "The openai-completions stream ended without a finish_reason or [DONE] "
        "(the response was cut short)"
    )
    assert error_name(failed) == "MalformedStream"
    assert [e.success for e in faulted.recorder.of("auto_retry_end")] == [True]
    assert assistant_text(recovered) == "A whole answer"
    await _assert_failed_attempt_kept_but_omitted(faulted, path, live, "Half an")


MALFORMED = {
    "invalid JSON": (
        Act(parts=[*text_parts("Hi"), b'data: {"id": broken\n\n', *text_tail()]),
        "Malformed openai-completions stream: invalid JSON in a 'message' event: '{\"id\": broken'",
    ),
    "not an object": (
        Act(parts=[*text_parts("Hi"), b"data: [1,2,3]\n\n", *text_tail()]),
        "Malformed openai-completions stream: expected a JSON object, got '[1,2,3]'",
    ),
    "bad tool call": (
        Act(
            parts=[
                *text_parts("Hi"),
                chunk({"tool_calls": [{"index": "x", "function": {"arguments": 5}}]}),
                *text_tail(),
            ]
        ),
        "Malformed openai-completions stream: tool call index 'x' is not a number",
    ),
    "not an event stream": (
        Act(
            headers=[("content-type", "text/html")],
            parts=[b"<html><body>Gateway says hello</body></html>"],
        ),
        "200 Expected an event stream but got text/html: "
        "<html><body>Gateway says hello</body></html>",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_malformed_sse_ends_the_run_with_a_clear_error_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    act, message = MALFORMED[case]
    async with running_vendor() as vendor:
        vendor.push(act)
        async with fault_session(tmp_path, monkeypatch, vendor.base_url, QUICK_RETRY) as faulted:
            await faulted.session.prompt("first")  # no exception out of the session
            await faulted.recorder.wait_for("agent_settled")
            assert len(vendor.requests) == 1  # not retried
            vendor.push(answer("Still here"))
            await faulted.session.prompt("second")
            await faulted.recorder.wait_for("agent_settled", 2)
            live = await faulted.session.messages()
            path = faulted.session.session_file
    failed, answered = _answers(faulted)
    assert failed.stop_reason == "error" and failed.error_message == message
    assert error_name(failed) == "MalformedStream"
    assert faulted.recorder.of("auto_retry_start") == []  # not transient: no retry
    assert [e.will_retry for e in faulted.recorder.of("agent_end")] == [False, False]
    assert len(vendor.requests) == 2
    assert assistant_text(answered) == "Still here"
    # Kept and shown: the error is part of the conversation (not omitted), in memory and file.
    assert path is not None
    assert [e["message"].get("errorMessage") for e in message_entries(path, "assistant")] == [
        message,
        None,
    ]
    assert omitted_ids(path) == set()
    assert await reopen(path, faulted.project) == live
    assert [m.role for m in live] == ["system", "user", "assistant", "user", "assistant"]
