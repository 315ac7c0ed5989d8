"""Subscription logins as ``pitrio login`` runs them: the flows, pi's provider names, storage."""

from __future__ import annotations

from pitrio.actors.model_router.auth_file import save_entry
from pitrio.actors.model_router.credentials import AUTH_FILE_NAME
from pitrio.actors.model_router.oauth import PROVIDER_NAMES
from pitrio.actors.model_router.oauth_login import login
from pitrio.actors.session_store.paths import agent_dir

__all__ = ["AUTH_FILE_NAME", "PROVIDER_NAMES", "agent_dir", "login", "save_entry"]
