"""The database schema as versioned migrations (pure: SQL text only, no driver).

``pitrio db migrate`` applies every migration newer than the database's version, in order, in
one transaction under an advisory lock (two daemons migrating at once do it once). A store
refuses to start on a database whose version is not :data:`SCHEMA_VERSION`.

Tables:

* ``pitrio_sessions``: one row per session: the header's fields (and the header line's exact
  JSON text, so an export gives back pi's bytes), the listing fields kept up to date by the
  appends (name, message count, first message, modified), and the lease: ``owner`` (a
  daemon's id), ``owner_url`` (where its clients connect), ``fence`` (grows by one with each
  lease taken; appends carry it) and ``lease_expires`` (database time).
* ``pitrio_entries``: one row per entry: session id, sequence number (1, 2, ... in append
  order, unique per session), entry id (unique per session), parent id, type, created at (the
  entry's timestamp) and the entry line's exact JSON text (``json`` keeps the text as given,
  ``jsonb`` would reorder keys and change numbers, which breaks byte-exact round trips).
"""

from __future__ import annotations

import attrs

SCHEMA_TABLE = "pitrio_schema"
ADVISORY_LOCK = 0x70697472696F  # "pitrio": serialises concurrent migrations
NOTIFY_CHANNEL = "pitrio_entries"


@attrs.frozen
class Migration:
    """One step of the schema: its version, a name, and the SQL statements it runs."""

    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions, entries and leases",
        (
            """
            CREATE TABLE pitrio_sessions (
                id text PRIMARY KEY,
                cwd text NOT NULL,
                version integer NOT NULL,
                created_at timestamptz,
                parent_session text,
                header json NOT NULL,
                name text,
                message_count integer NOT NULL DEFAULT 0,
                first_message text,
                modified_at timestamptz NOT NULL DEFAULT now(),
                last_seq bigint NOT NULL DEFAULT 0,
                owner text,
                owner_url text,
                fence bigint NOT NULL DEFAULT 0,
                lease_expires timestamptz
            )
            """,
            "CREATE INDEX pitrio_sessions_modified ON pitrio_sessions (modified_at DESC)",
            """
            CREATE TABLE pitrio_entries (
                session_id text NOT NULL REFERENCES pitrio_sessions (id) ON DELETE CASCADE,
                seq bigint NOT NULL,
                entry_id text NOT NULL,
                parent_id text,
                type text NOT NULL,
                created_at timestamptz,
                payload json NOT NULL,
                PRIMARY KEY (session_id, seq),
                UNIQUE (session_id, entry_id)
            )
            """,
        ),
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version this pitrio needs."""


CREATE_SCHEMA_TABLE = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def pending(applied: set[int]) -> list[Migration]:
    """The migrations not applied yet, in order."""
    return [migration for migration in MIGRATIONS if migration.version not in applied]
