"""How the host starts one session: the :class:`SessionOptions` it passes (pure).

A session starts from its file, from the shared store, or, when it has neither yet, from the
stub its creation left (header, seed entries, the model and thinking level asked for), which a
stop before anything was written brings up to date (:func:`kept_stub`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from pitrio.actors.session.bootstrap import SessionOptions
from pitrio.actors.session_store import SessionSeed, StoredEntry
from pitrio.errors import SessionNotFoundError
from pitrio.messages.entries import SessionHeader

if TYPE_CHECKING:
    from pitrio.actors.host.context import HostConfig
    from pitrio.actors.session.commands import SessionState


@attrs.frozen(kw_only=True)
class SessionStub:
    """How to start a session that has no file yet (nothing to reopen from)."""

    header: SessionHeader
    seed_entries: tuple[StoredEntry, ...] = ()
    model: str | None = None
    thinking_level: str | None = None
    name: str | None = None


def kept_stub(
    previous: SessionStub | None, header: SessionHeader, state: SessionState
) -> SessionStub:
    """The stub a session not written yet keeps at a stop for its next start: its model,
    thinking level and name as ``state`` has them now, the seed entries it started from."""
    model = state.agent.model
    return SessionStub(
        header=header,
        seed_entries=previous.seed_entries if previous is not None else (),
        model=f"{model.provider}/{model.id}",
        thinking_level=state.agent.thinking_level,
        name=state.session_name,
    )


def start_options(
    config: HostConfig,
    *,
    session_id: str,
    cwd: str,
    path: Path | None,
    persisted: bool,
    stub: SessionStub | None,
) -> SessionOptions:
    """The options of one start of session ``session_id``.

    With a shared store the stored session is opened (else started from ``stub``); without,
    the file at ``path`` when ``persisted``, else ``stub`` seeds a new one (written to ``path``
    when there is one). Raises :class:`SessionNotFoundError` when there is neither file nor
    stub.
    """
    base = SessionOptions(
        cwd=cwd,
        agent_dir=config.agent_dir,
        session_dir=config.session_dir,
        ui_clients=True,  # websocket clients answer extension dialogs
        # pi 1.6.0's project trust; no client is asked yet: "ask" means not trusted.
        project_trust_rules=True,
        # One client's model or thinking choice is its session's, not every session's
        # and the CLI's default (DESIGN-NOTES, issue 23).
        save_model_defaults=False,
    )
    backend = config.store
    if backend is not None:
        # A shared store opens the stored session, else starts it from the stub.
        seed = None
        if stub is not None:
            seed = SessionSeed(header=stub.header, entries=stub.seed_entries, path=None)
            base = attrs.evolve(
                base,
                model=stub.model or config.default_model,
                thinking_level=stub.thinking_level,
            )
        return attrs.evolve(base, store_opener=backend.opener(session_id, seed))
    if persisted:
        assert path is not None
        return attrs.evolve(base, path=path)
    if stub is None:
        raise SessionNotFoundError(f"Session {session_id}: its file is gone")
    seed = SessionSeed(header=stub.header, entries=stub.seed_entries, path=path)
    return attrs.evolve(
        base,
        seed=seed,
        model=stub.model or config.default_model,
        thinking_level=stub.thinking_level,
        persist=path is not None,
    )
