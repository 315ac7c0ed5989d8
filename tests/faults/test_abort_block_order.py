"""The order of a response's block events, as pi sends them (issue 21, item 7).

pi's Chat Completions provider ends every block when the response ends, an abort included:
an aborted answer's ``text_end`` (and ``thinking_end``) come before its ``message_end``
(``aborted``). Seen with pi 0.73.1 against the shared mock: ``text_start``, ``text_delta``,
``text_end``, ``message_end(aborted)``. A real session over a loopback vendor that goes quiet
mid-answer until the client leaves.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pitrio.messages.agent import AssistantMessage
from pitrio.messages.events import MessageEnd, MessageUpdate
from tests.faults.support import assistant_text, fault_session
from tests.faults.vendor import Act, chunk, running_vendor, text_parts


async def test_an_abort_ends_the_open_blocks_before_the_aborted_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    never = trio.Event()  # the vendor waits for it: the answer stops mid-stream
    thinking_then_text = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Pondering"}),
        *text_parts("Partial ")[1:],
        never,
    ]
    async with running_vendor() as vendor:
        vendor.push(Act(parts=thinking_then_text, ending="stall"))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url) as faulted:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(faulted.session.prompt, "question")
                await faulted.recorder.wait_until(
                    lambda e: (
                        isinstance(e, MessageUpdate) and assistant_text(e.message) == "Partial "
                    )
                )
                await faulted.session.abort()
            await faulted.recorder.wait_for("agent_settled")
    sequence = [
        e.assistant_message_event.type if isinstance(e, MessageUpdate) else "message_end"
        for e in faulted.recorder.events
        if isinstance(e, MessageUpdate)
        or (isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage))
    ]
    assert sequence == [
        "thinking_start",
        "thinking_delta",
        "text_start",
        "text_delta",
        "thinking_end",
        "text_end",
        "message_end",
    ]
    ends = [e for e in faulted.recorder.events if isinstance(e, MessageUpdate)][-2:]
    assert [(e.assistant_message_event.content_index) for e in ends] == [0, 1]
    (aborted,) = [
        e.message
        for e in faulted.recorder.of("message_end")
        if isinstance(e.message, AssistantMessage)
    ]
    assert aborted.stop_reason == "aborted" and aborted.error_message == "Request was aborted"
    assert assistant_text(aborted) == "Partial "
