"""Starting session stores: pi's ``SessionManager.open`` / ``create`` and forks' seeds."""

from __future__ import annotations

from pathlib import Path

import trio

from pitrio.actors._actor import Address
from pitrio.actors.session_store.actor import SessionStore
from pitrio.actors.session_store.commands import SessionSeed, StoreCommand, StoreOptions, new_header
from pitrio.actors.session_store.handle import SessionStoreHandle
from pitrio.actors.session_store.paths import session_dir, session_file_name
from pitrio.errors import collapse_groups


async def start_store(nursery: trio.Nursery, store: SessionStore) -> SessionStoreHandle:
    """Start ``store`` in ``nursery`` and return its handle once it has loaded.

    Opening errors (:class:`~pitrio.errors.SessionFileError`, ...) are raised as themselves,
    not wrapped in the actor nursery's exception group.
    """
    with collapse_groups():
        address: Address[StoreCommand] = await nursery.start(store.run)
    return SessionStoreHandle(
        address, header=store.header, path=store.path, read_only=store.read_only
    )


async def open_store(
    nursery: trio.Nursery,
    path: Path | str,
    *,
    cwd: str | None = None,
    read_only: bool = False,
    options: StoreOptions | None = None,
) -> SessionStoreHandle:
    """pi's ``SessionManager.open``: the session in ``path`` (a new one there if missing).

    Raises :class:`~pitrio.errors.SessionFileError` for a file with errors (strict),
    :class:`~pitrio.errors.SessionLockedError` if another live process writes it.
    """
    store = SessionStore.opening(Path(path), cwd=cwd, read_only=read_only, options=options)
    return await start_store(nursery, store)


async def create_store(
    nursery: trio.Nursery,
    cwd: str,
    *,
    session_dir_override: str | None = None,
    session_id: str | None = None,
    parent_session: str | None = None,
    persist: bool = True,
    options: StoreOptions | None = None,
) -> SessionStoreHandle:
    """pi's ``SessionManager.create`` / ``newSession`` (``persist=False``: ``inMemory``).

    The file goes in the session dir of ``cwd`` and is written with the first append that
    is not ``lazy``.
    """
    header = new_header(cwd, session_id=session_id, parent_session=parent_session)
    path = None
    if persist:
        directory = session_dir(cwd, override=session_dir_override)
        path = directory / session_file_name(header.timestamp, header.id)
    return await start_store(nursery, SessionStore.creating(header, path, options=options))


async def start_seeded_store(
    nursery: trio.Nursery, seed: SessionSeed, *, options: StoreOptions | None = None
) -> SessionStoreHandle:
    """Start the store of a fork or clone; its file is written now if it holds an assistant
    message, else lazily."""
    return await start_store(nursery, SessionStore.seeded(seed, options=options))
