"""Anthropic message threads against real pi 1.6.0: a ``models.json`` provider whose ``compat``
turns ``supportsMessageThreads`` on for a loopback Anthropic, two prompts in one print-mode run;
both agents start a thread with the first request and continue it with the second, which sends
only the new turn, no ``system`` or ``tools``, and the threads beta. Without the compat key (a
base URL that is not ``api.anthropic.com``) neither sends a thread; a reply that names another
model (a fallback's) is not continued: the next request starts a new thread."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import (
    OneShot,
    cleanup,
    outcomes_fixture,
    pi_argv,
    pitrio_argv,
    run_print,
)

BETA = "message-threads-2026-08-12"
TEXT = {"kind": "text", "deltas": 1, "delta_text": "ok"}
EXPIRED = {
    "kind": "error",
    "status": 404,
    "body": {
        "type": "error",
        "error": {
            "type": "not_found_error",
            "message": "thread expired",
            "details": {"error_code": "thread_not_found"},
        },
    },
}
REFUSED = {
    "kind": "error",
    "status": 400,
    "body": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "thread: Extra inputs are not permitted",
        },
    },
}


def models(compat: dict[str, Any] | None) -> dict[str, Any]:
    """A provider ``thr`` of one Anthropic model at the mock, with ``compat`` if given."""
    provider: dict[str, Any] = {
        "baseUrl": "{base}",
        "api": "anthropic-messages",
        "apiKey": "sk-thr",
        "models": [{"id": "thr-model", "contextWindow": 100000, "maxTokens": 1000}],
    }
    if compat is not None:
        provider["compat"] = compat
    return {"providers": {"thr": provider}}


@dataclass(frozen=True)
class Case:
    """A ``compat`` of the provider (``None``: none)."""

    name: str
    compat: dict[str, Any] | None
    served: str = "thr-model"
    """The model the mock's replies name (another than the request's: a fallback's reply,
    which the server keeps no thread of)."""
    queue: tuple[dict[str, Any], ...] = ()
    """Answers scripted before the mock's default text (an error refusing the thread)."""
    prompts: tuple[str, ...] = ("one", "two")


CASES = [
    Case("threads on", {"supportsMessageThreads": True}),
    Case("default off for a gateway", None),
    Case("a reply from another model", {"supportsMessageThreads": True}, served="mock-model"),
    Case(
        "an endpoint that refuses threads",
        {"supportsMessageThreads": True},
        queue=(TEXT, REFUSED),
        prompts=("one", "two", "three"),
    ),
    Case(
        "an expired thread",
        {"supportsMessageThreads": True},
        queue=(TEXT, EXPIRED),
        prompts=("one", "two", "three"),
    ),
]


def saved_diagnostics(shot: OneShot) -> list[Any]:
    """The ``diagnostics`` of each assistant message in the run's session file, timestamps
    left out, and its ``responseModel``."""
    out: list[Any] = []
    assert shot.root is not None
    for path in sorted(shot.root.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            message = json.loads(line).get("message") or {}
            if message.get("role") == "assistant":
                found = message.get("diagnostics")
                if found is not None:
                    found = [{k: v for k, v in d.items() if k != "timestamp"} for d in found]
                out.append((message.get("responseModel"), found))
    return out


def run_case(case: Case, agent: str, base: Path) -> tuple[OneShot, list[Any]]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    shot = run_print(
        agent,
        argv,
        {"models.json": models(case.compat)},
        args=["--model", "thr/thr-model", "--no-tools", "-p", *case.prompts],
        base=base,
        mock_config={"model": case.served, "queue": list(case.queue)},
    )
    try:
        return shot, saved_diagnostics(shot)
    finally:
        cleanup(shot)


outcomes = outcomes_fixture(CASES, run_case, "pitrio-threads-")


def shape(shot: OneShot) -> list[dict[str, Any]]:
    """What the comparison looks at in each request: the thread field, which top-level keys
    were sent, the messages' roles and texts, and the beta header."""
    out = []
    for body, http in zip(shot.requests, shot.http, strict=True):
        thread = body.get("thread")
        if isinstance(thread, dict) and "previous_message_id" in thread:
            thread = {**thread, "previous_message_id": "<id>"}  # each mock numbers its own
        out.append(
            {
                "thread": thread,
                "keys": sorted(key for key in body if key != "thread"),
                "messages": body.get("messages"),
                "beta": http["headers"].get("anthropic-beta"),
            }
        )
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_same_thread_requests_as_pi(
    case: Case, outcomes: dict[tuple[str, str], tuple[OneShot, list[Any]]]
) -> None:
    (pi, pi_saved), (pitrio, pitrio_saved) = (outcomes[(case.name, a)] for a in ("pi", "pitrio"))
    for shot in (pi, pitrio):
        assert shot.exit_code == 0, (shot.agent, shot.stderr[-600:])
    assert shape(pitrio) == shape(pi)
    assert pitrio_saved == pi_saved
    kinds = [(s["thread"] or {}).get("type") for s in shape(pi)]
    if case.queue == (TEXT, EXPIRED):  # resent whole as a new thread, which continues next
        assert kinds == ["create", "continue", "create", "continue"]
        assert pi_saved[1][1][0]["details"] == {"reason": "thread_not_found"}
        return
    if case.queue:  # continue refused, resent whole without a thread, then threads off
        assert kinds == ["create", "continue", None, None]
        assert all(s["beta"] == BETA for s in shape(pi))
        fallback = {"type": "anthropic_thread_fallback", "details": {"reason": "400"}}
        assert pi_saved[1][1] == [
            {**fallback, "error": {"message": pi_saved[1][1][0]["error"]["message"]}}
        ]
        assert "thread: Extra inputs" in pi_saved[1][1][0]["error"]["message"]
        return
    assert len(pi.requests) == 2, pi.requests
    first, second = shape(pi)
    if case.compat and case.served != "thr-model":  # nothing to continue: a new thread
        assert [model for model, _ in pi_saved] == [case.served, case.served]
        assert first["thread"] == second["thread"] == {"type": "create"}
        assert len(second["messages"]) == 3
    elif case.compat:
        assert first["thread"] == {"type": "create"} and first["beta"] == BETA
        assert second["thread"] == {"type": "continue", "previous_message_id": "<id>"}
        assert second["beta"] == BETA and len(second["messages"]) == 1
        assert "system" not in second["keys"]
    else:
        assert first["thread"] is None and second["thread"] is None
        assert len(second["messages"]) == 3
