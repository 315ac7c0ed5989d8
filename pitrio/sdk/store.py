"""Sessions at rest, for the command-line transports: directories, listing, checking, repair.

The agent's directory and the session directory of a cwd, the catalog of session files (pi's
``SessionInfo``), resolving a ``--session`` argument, parsing a session file, checking and
repairing one, exporting one as HTML, and the ``session.store`` setting that names a shared
store instead.
"""

from __future__ import annotations

from pitrio.actors.session.export_file import export_file_html
from pitrio.actors.session.resources.settings import configured_store
from pitrio.actors.session_store.catalog import (
    SessionInfo,
    list_all_sessions,
    list_sessions,
    resolve_session_arg,
)
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.maintenance import check_file, repair_file
from pitrio.actors.session_store.paths import agent_dir, session_dir, session_file_name
from pitrio.actors.session_store.tree import TreeNode

__all__ = [
    "SessionInfo",
    "TreeNode",
    "agent_dir",
    "check_file",
    "configured_store",
    "export_file_html",
    "list_all_sessions",
    "list_sessions",
    "parse_session_bytes",
    "repair_file",
    "resolve_session_arg",
    "session_dir",
    "session_file_name",
]
