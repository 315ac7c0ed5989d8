"""The run ledger: what the daemon's log says about a session's runs (pure)."""

from __future__ import annotations

from pitrio.actors.host.runs import RunLedger, error_status
from pitrio.actors.model_router.diagnostics import error_diagnostic
from pitrio.messages.agent import Cost, Usage
from tests.actors.test_supervisor_support import assistant, failed


def usage(input: int, output: int, cost: float) -> Usage:
    return Usage(input=input, output=output, total_tokens=input + output, cost=Cost(total=cost))


def test_a_run_sums_its_responses_and_reports_its_duration() -> None:
    ledger = RunLedger("s1")
    assert ledger.start(10.0) == ("info", "run_start", {"session": "s1", "run": 1})
    assert ledger.response(assistant(stop="toolUse", use=usage(100, 10, 0.5))) is None
    assert ledger.tool_failed("read", "call-1", "ENOENT: missing.txt") == (
        "warning",
        "tool_failed",
        {
            "session": "s1",
            "run": 1,
            "tool": "read",
            "toolCallId": "call-1",
            "error": "ENOENT: missing.txt",
        },
    )
    assert ledger.response(assistant(use=usage(200, 20, 0.25))) is None
    level, name, fields = ledger.settled(10.8126) or ("", "", {})
    assert (level, name) == ("info", "run_end")
    assert fields == {
        "session": "s1",
        "run": 1,
        "duration_ms": 813,
        "turns": 2,
        "model": "faux/faux-1",
        "stop_reason": "stop",
        "usage": {"input": 300, "output": 30, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 330},
        "cost": 0.75,
        "errors": 0,
        "tool_failures": 1,
    }
    # the next run starts from zero
    ledger.start(20.0)
    _, _, again = ledger.settled(20.0) or ("", "", {})
    assert again["run"] == 2 and again["turns"] == 0 and again["usage"]["input"] == 0


def test_a_failed_response_is_a_provider_error_with_its_status() -> None:
    ledger = RunLedger("s1")
    ledger.start(0.0)
    level, name, fields = ledger.response(failed("429 Rate limit reached")) or ("", "", {})
    assert (level, name) == ("warning", "provider_error")
    assert fields["status"] == 429 and fields["error"] == "429 Rate limit reached"
    assert ledger.response(assistant(stop="aborted")) is None  # an abort is no failure
    _, _, end = ledger.settled(1.0) or ("", "", {})
    assert end["errors"] == 1 and end["stop_reason"] == "aborted"


def test_error_status_prefers_the_diagnostics_and_else_reads_the_text() -> None:
    plain = failed("Connection error.")
    assert error_status(plain) is None
    assert error_status(failed("503 overloaded")) == 503
    # pi 1.6.0's openai-completions text: the status, a colon, the error body as JSON.
    assert error_status(failed('400: {"message":"bad","type":"invalid_request_error"}')) == 400
    assert error_status(failed("400:{}")) is None
    assert error_status(failed("a 503 in the middle")) is None
    diagnosed = failed("HTTP error")
    import attrs

    diagnosed = attrs.evolve(
        diagnosed, diagnostics=(error_diagnostic("x", name="HttpError", status=502),)
    )
    assert error_status(diagnosed) == 502


def test_a_settle_without_a_run_is_not_logged_and_long_errors_are_cut() -> None:
    ledger = RunLedger("s1")
    assert ledger.settled(5.0) is None
    ledger.start(0.0)
    _, _, fields = ledger.response(failed("500 " + "x" * 2000)) or ("", "", {})
    assert len(fields["error"]) == 503 and fields["error"].endswith("...")
