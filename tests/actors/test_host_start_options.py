"""The options the host starts a session with: from its file, its stub, or the shared store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitrio.actors.host.context import HostConfig
from pitrio.actors.host.start_options import SessionStub, start_options
from pitrio.errors import SessionNotFoundError
from pitrio.messages.entries import SessionHeader

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
