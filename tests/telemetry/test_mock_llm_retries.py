"""HTTP 500 then success from the shared mock LLM (a real vendor process): with provider
retries asked for, the provider's own repeat is counted; with them off (pi 1.6.0's default)
the session's retry is a span."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio import telemetry
from tests.faults.mock_llm import MOCK_LLM, mock_llm
from tests.faults.support import fault_session
from tests.telemetry.conftest import Memory

pytestmark = pytest.mark.skipif(not MOCK_LLM.exists(), reason="../shared/tools/mock_llm.py missing")

SCRIPT = {
    "queue": [
        {"kind": "error", "preset": "server_error", "status": 500},
        {"kind": "text", "text": "Recovered", "deltas": 2},
    ]
}


async def test_a_provider_level_retry_is_counted_inside_one_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: Memory
) -> None:
    settings = {"retry": {"provider": {"maxRetries": 2}}}
    with telemetry.using(memory.telemetry):
        async with (
            mock_llm(SCRIPT, tmp_path) as port,
            fault_session(
                tmp_path, monkeypatch, f"http://127.0.0.1:{port}/v1", settings
            ) as faulted,
        ):
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            await trio.testing.wait_all_tasks_blocked()
            spans = memory.finished()
    assert "auto_retry_start" not in faulted.recorder.types()  # the session saw no failure
    assert sorted(s.name for s in spans) == ["chat m1", "invoke_agent pitrio", "turn"]
    retries = memory.metrics()["pitrio.llm.transport_retries"]
    assert retries == [
        ({"pitrio.llm.api": "openai-completions", "http.response.status_code": 500}, 1)
    ]


async def test_with_provider_retries_off_the_session_retry_is_a_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: Memory
) -> None:
    settings = {"retry": {"baseDelayMs": 1}}  # provider retries: none, pi 1.6.0's default
    with telemetry.using(memory.telemetry):
        async with (
            mock_llm(SCRIPT, tmp_path) as port,
            fault_session(
                tmp_path, monkeypatch, f"http://127.0.0.1:{port}/v1", settings
            ) as faulted,
        ):
            await faulted.session.prompt("question")
            await faulted.recorder.wait_for("agent_settled")
            await trio.testing.wait_all_tasks_blocked()
            spans = memory.finished()
    names = sorted(s.name for s in spans)
    assert names == ["chat m1", "chat m1", "invoke_agent pitrio", "retry", "turn", "turn"]
    failed = min((s for s in spans if s.name == "chat m1"), key=lambda s: s.start_time or 0)
    assert (failed.status.description or "").startswith("500")
    retry = next(s for s in spans if s.name == "retry")
    assert retry.attributes is not None and retry.attributes["pitrio.retry.attempt"] == 1
    assert "pitrio.llm.transport_retries" not in memory.metrics()
