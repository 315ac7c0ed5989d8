"""Stored credentials as ``pitrio auth`` reads, writes and checks them (``auth.json`` in pi's
format, pi's lock on it, ``models.json``, the providers' variables)."""

from __future__ import annotations

from pitrio.actors.model_router.actor import MODELS_FILE_NAME
from pitrio.actors.model_router.auth_file import (
    OAuthEntry,
    load_auth_file,
    read_auth_document,
    save_api_key,
    try_lock,
    unlock,
    write_auth_document,
)
from pitrio.actors.model_router.catalogue import provider_env_vars
from pitrio.actors.model_router.credentials import AUTH_FILE_NAME
from pitrio.actors.model_router.models_json import load_models_json
from pitrio.actors.model_router.oauth import PROVIDER_NAMES
from pitrio.actors.session_store.paths import agent_dir

__all__ = [
    "AUTH_FILE_NAME",
    "MODELS_FILE_NAME",
    "PROVIDER_NAMES",
    "OAuthEntry",
    "agent_dir",
    "load_auth_file",
    "load_models_json",
    "provider_env_vars",
    "read_auth_document",
    "save_api_key",
    "try_lock",
    "unlock",
    "write_auth_document",
]
