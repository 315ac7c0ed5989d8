"""The options the host starts a session with: from its file, its stub, or the shared store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitrio.actors.host.context import HostConfig
from pitrio.actors.host.start_options import SessionStub, kept_stub, start_options
from pitrio.actors.model_router import FAUX_MODELS
from pitrio.actors.session_store import StoredEntry
from pitrio.errors import SessionNotFoundError
from pitrio.messages.agent import user_message
from pitrio.messages.entries import MessageEntry, SessionHeader
from tests.transports.rpc.test_commands import agent_state, session_state

HEADER = SessionHeader(version=3, id="s-1", timestamp="2026-01-01T00:00:00.000Z", cwd="/w")


def test_a_persisted_session_opens_its_file(tmp_path: Path) -> None:
    config = HostConfig(agent_dir=tmp_path, default_model="faux/echo")
    path = tmp_path / "s.jsonl"
    options = start_options(
        config, session_id="s-1", cwd="/w", path=path, persisted=True, stub=None
    )
    assert options.path == path and options.seed is None
    assert options.ui_clients is True and options.save_model_defaults is False
    assert options.agent_dir == tmp_path and options.cwd == "/w"


def test_a_new_session_starts_from_its_stub(tmp_path: Path) -> None:
    config = HostConfig(agent_dir=tmp_path, default_model="faux/echo")
    stub = SessionStub(header=HEADER, thinking_level="high")
    path = tmp_path / "s.jsonl"
    options = start_options(
        config, session_id="s-1", cwd="/w", path=path, persisted=False, stub=stub
    )
    assert options.seed is not None and options.seed.header == HEADER
    assert options.seed.path == path and options.persist is True
    assert options.model == "faux/echo" and options.thinking_level == "high"
    in_memory = start_options(
        config, session_id="s-1", cwd="/w", path=None, persisted=False, stub=stub
    )
    assert in_memory.persist is False
    chosen = SessionStub(header=HEADER, model="faux/other")
    picked = start_options(
        config, session_id="s-1", cwd="/w", path=None, persisted=False, stub=chosen
    )
    assert picked.model == "faux/other"


def test_neither_file_nor_stub_is_a_session_not_found(tmp_path: Path) -> None:
    config = HostConfig(agent_dir=tmp_path)
    with pytest.raises(SessionNotFoundError, match="s-1: its file is gone"):
        start_options(
            config, session_id="s-1", cwd="/w", path=tmp_path / "x", persisted=False, stub=None
        )


def test_a_stop_before_the_file_keeps_the_sessions_choices_in_its_stub() -> None:
    model = next(m for m in FAUX_MODELS if m.id == "faux-1")
    state = session_state(agent=agent_state(model, thinking_level="high"), session_name="named")
    seed = StoredEntry.from_entry(
        MessageEntry(id="e1", parent_id=None, timestamp=HEADER.timestamp, message=user_message("u"))
    )
    created = SessionStub(header=HEADER, seed_entries=(seed,), model="faux/echo")
    kept = kept_stub(created, HEADER, state)
    assert kept == SessionStub(
        header=HEADER,
        seed_entries=(seed,),  # what it was started from
        model=f"{model.provider}/faux-1",  # as chosen since, not as created
        thinking_level="high",
        name="named",
    )
    assert kept_stub(None, HEADER, state).seed_entries == ()
