"""The PostgreSQL store, for ``pitrio serve --store`` and ``pitrio db``: optional (psycopg).

Importing this module loads the database driver and raises :class:`ImportError` when it is not
installed, so transports import it inside the function that needs it.
"""

from __future__ import annotations

from pitrio.actors.session_store.postgres.backend import (
    BackendOptions,
    PgBackend,
    export_session,
    import_session,
    is_postgres_url,
)
from pitrio.actors.session_store.postgres.database import Database
from pitrio.actors.session_store.postgres.lease import LeaseTerms, Owner
from pitrio.actors.session_store.postgres.schema import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "BackendOptions",
    "Database",
    "LeaseTerms",
    "Owner",
    "PgBackend",
    "export_session",
    "import_session",
    "is_postgres_url",
]
