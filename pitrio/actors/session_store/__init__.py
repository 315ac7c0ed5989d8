"""The session store actor: the JSONL entry tree of one session file (DESIGN §2, spec §4).

Pure cores: :mod:`.file_format` (lines and their problems), :mod:`.tree` (ids, parents, leaf,
labels), :mod:`.projection` (the model's context, kept incrementally), :mod:`.migrations`.
I/O: :mod:`.storage`, :mod:`.lease` (one live writer), :mod:`.catalog` (listing, resolution),
:mod:`.maintenance` (check, repair). The actor: :mod:`.actor`, its data :mod:`.commands`, its
read-only functions :mod:`.queries`, its handle :mod:`.handle`, started by :mod:`.start`.

The catalog's names are imported on first access (module ``__getattr__``): a new session
lists, resolves and forks no file (cold start, issue 38).
"""

from typing import TYPE_CHECKING, Any

from pitrio.actors.session_store.actor import SessionStore
from pitrio.actors.session_store.commands import (
    ForkResult,
    FsyncPolicy,
    SessionSeed,
    StoreOptions,
    StoreStatus,
    new_header,
)
from pitrio.actors.session_store.file_format import Problem
from pitrio.actors.session_store.handle import SessionStoreHandle
from pitrio.actors.session_store.projection import ContextMessages, ModelRef, SessionContext
from pitrio.actors.session_store.start import (
    create_store,
    open_store,
    start_seeded_store,
    start_store,
)
from pitrio.actors.session_store.stored import StoredEntry, UnknownEntry
from pitrio.actors.session_store.tree import ForkMessage, TreeNode

if TYPE_CHECKING:
    from pitrio.actors.session_store.catalog import (
        ResolvedSession,
        SessionInfo,
        fork_from,
        list_all_sessions,
        list_sessions,
        most_recent_session,
        resolve_session_arg,
    )

_CATALOG = frozenset(
    {
        "ResolvedSession",
        "SessionInfo",
        "fork_from",
        "list_all_sessions",
        "list_sessions",
        "most_recent_session",
        "resolve_session_arg",
    }
)


def __getattr__(name: str) -> Any:
    """The catalog's names (listing, resolution, forks), from :mod:`.catalog` on first access."""
    if name not in _CATALOG:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pitrio import _attrs_cache

    with _attrs_cache.caching():  # its classes from the attrs method cache
        from pitrio.actors.session_store import catalog
    value = getattr(catalog, name)
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "ContextMessages",
    "ForkMessage",
    "ForkResult",
    "FsyncPolicy",
    "ModelRef",
    "Problem",
    "ResolvedSession",
    "SessionContext",
    "SessionInfo",
    "SessionSeed",
    "SessionStore",
    "SessionStoreHandle",
    "StoreOptions",
    "StoreStatus",
    "StoredEntry",
    "TreeNode",
    "UnknownEntry",
    "create_store",
    "fork_from",
    "list_all_sessions",
    "list_sessions",
    "most_recent_session",
    "new_header",
    "open_store",
    "resolve_session_arg",
    "start_seeded_store",
    "start_store",
]
