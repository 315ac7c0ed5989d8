"""What ``pitrio mcp add|remove|list|login|logout`` needs (issue 35): reading and editing
``mcp.json`` files, checking servers, OAuth sign-in and the project's trust. Imported only
by that command.

The names of sign-in and of the MCP actor (:data:`_ON_USE`) load their modules on first use
(PEP 562): those import the MCP SDK, ~0.45 s of a command that only edits a file (``add``,
``remove``) had no use for."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitrio.actors.mcp.config import (
    McpConfig,
    McpServerConfig,
    load_mcp_config,
    parse_server,
    project_config_file,
    user_config_file,
)
from pitrio.actors.mcp.manage import (
    McpFileError,
    ServerReport,
    add_server,
    check_servers,
    remove_server,
)
from pitrio.actors.mcp.naming import EXPOSURES
from pitrio.actors.session.resources.settings import project_dir_names
from pitrio.actors.session.resources.trust import canonical_path, nearest_saved, read_trust_file
from pitrio.actors.session_store.paths import agent_dir

if TYPE_CHECKING:
    from pitrio.actors.mcp.actor import describe
    from pitrio.actors.mcp.oauth import CredentialFile, McpSignInRequired, uses_oauth
    from pitrio.actors.mcp.signin import (
        SignInError,
        connect_and_list,
        sign_in,
        sign_in_challenge,
        sign_in_needed,
    )

_ON_USE = {
    "describe": "pitrio.actors.mcp.actor",
    "CredentialFile": "pitrio.actors.mcp.oauth",
    "McpSignInRequired": "pitrio.actors.mcp.oauth",
    "uses_oauth": "pitrio.actors.mcp.oauth",
    "SignInError": "pitrio.actors.mcp.signin",
    "connect_and_list": "pitrio.actors.mcp.signin",
    "sign_in": "pitrio.actors.mcp.signin",
    "sign_in_challenge": "pitrio.actors.mcp.signin",
    "sign_in_needed": "pitrio.actors.mcp.signin",
}
"""The names served from the module that defines them, imported on first use."""


def __getattr__(name: str) -> Any:
    module = _ON_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once
    return value


def project_trusted(agent: Path, cwd: str) -> bool:
    """Whether a session in ``cwd`` would read the project's ``mcp.json`` without asking:
    ``trust.json``'s nearest saved decision for it trusts it."""
    saved = nearest_saved(read_trust_file(agent), canonical_path(cwd))
    return saved is not None and saved[1]


__all__ = [
    "EXPOSURES",
    "CredentialFile",
    "McpConfig",
    "McpFileError",
    "McpServerConfig",
    "McpSignInRequired",
    "ServerReport",
    "SignInError",
    "add_server",
    "agent_dir",
    "check_servers",
    "connect_and_list",
    "describe",
    "load_mcp_config",
    "parse_server",
    "project_config_file",
    "project_dir_names",
    "project_trusted",
    "remove_server",
    "sign_in",
    "sign_in_challenge",
    "sign_in_needed",
    "user_config_file",
    "uses_oauth",
]
