"""The daemon and project trust: a session created in an untrusted project asks the creating
client (``project_trust_request`` on ``/v1/host``) when it said it can answer
(``"trustDialog": true``), saves the answer as pi 1.6.0 does, and keeps the decision for the
session; a client that cannot answer gets an untrusted project."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pitrio.actors.session.resources.trust import canonical_path
from tests.transports.daemon_harness import (
    connect,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    until,
)

MARKER = """
from pathlib import Path
Path({marker!r}).write_text("imported")

def setup(api):
    pass
"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    extensions = tmp_path / "work" / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "marker.py").write_text(MARKER.format(marker=str(tmp_path / "imported")))
    return agent


async def _create_answering(agent: Path, answer: str | None) -> tuple[dict[str, Any], str]:
    """Create a session with the dialog, answer ``answer``; the request and the session id."""
    async with running_daemon(agent) as daemon, connect(daemon, "/v1/host") as host:
        assert (await receive(host))["type"] == "host_attached"
        await send(host, {"id": "c", "type": "create", "trustDialog": True})
        frames = await until(host, lambda f: f.get("type") == "project_trust_request")
        question = frames[-1]
        await send(host, {"type": "project_trust_response", "id": question["id"], "value": answer})
        created = (await until(host, is_response("c")))[-1]
        assert created["success"], created
        return question, created["data"]["sessionId"]


def _saved(agent: Path) -> Any:
    path = agent / "trust.json"
    return json.loads(path.read_text()) if path.exists() else None


async def test_a_client_that_cannot_answer_gets_an_untrusted_project(
    agent: Path, tmp_path: Path
) -> None:
    async with running_daemon(agent) as daemon:
        await create_session(daemon)  # no trustDialog: nobody is asked
    assert not (tmp_path / "imported").exists()
    assert _saved(agent) is None


async def test_trust_is_asked_and_saved(agent: Path, tmp_path: Path) -> None:
    work = canonical_path(tmp_path / "work")
    question, _ = await _create_answering(agent, "Trust")
    assert question["options"] == [
        "Trust",
        f"Trust parent folder ({canonical_path(tmp_path)})",
        "Trust (this session only)",
        "Do not trust",
        "Do not trust (this session only)",
    ]
    assert work in question["title"]
    assert (tmp_path / "imported").read_text() == "imported"
    assert _saved(agent) == {work: True}
    (tmp_path / "imported").unlink()
    # the saved answer decides the next session without a question
    async with running_daemon(agent) as daemon:
        await create_session(daemon, trustDialog=True)
    assert (tmp_path / "imported").exists()


@pytest.mark.parametrize(
    ("answer", "imported", "saved"),
    [
        ("Trust (this session only)", True, None),
        ("Do not trust", False, "no"),
        ("Do not trust (this session only)", False, None),
        (None, False, None),  # dismissed
        ("Trust parent folder", True, "parent"),
    ],
)
async def test_each_answer(
    agent: Path, tmp_path: Path, answer: str | None, imported: bool, saved: str | None
) -> None:
    parent = canonical_path(tmp_path)
    if answer == "Trust parent folder":
        answer = f"Trust parent folder ({parent})"
    await _create_answering(agent, answer)
    assert (tmp_path / "imported").exists() == imported
    expected = {
        None: None,
        "no": {canonical_path(tmp_path / "work"): False},
        "parent": {parent: True},
    }[saved]
    assert _saved(agent) == expected


async def test_an_answer_to_no_question_is_refused(agent: Path) -> None:
    async with running_daemon(agent) as daemon, connect(daemon, "/v1/host") as host:
        await receive(host)
        await send(host, {"type": "project_trust_response", "id": "trust-9", "value": "Trust"})
        frame = await receive(host)
    assert frame["success"] is False
    assert frame["error"] == "project_trust_response: no open question 'trust-9'"
