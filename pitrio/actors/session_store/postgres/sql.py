"""Every SQL statement of the PostgreSQL store (pure text; parameters are named).

Times that decide leases are the database's (``clock_timestamp()``), never a daemon's clock:
daemons on several machines agree on one clock that way.
"""

from __future__ import annotations

from pitrio.actors.session_store.postgres.schema import NOTIFY_CHANNEL, SCHEMA_TABLE

SCHEMA_VERSION_QUERY = f"SELECT coalesce(max(version), 0) FROM {SCHEMA_TABLE}"
SCHEMA_TABLE_EXISTS = "SELECT to_regclass(%(name)s) IS NOT NULL"

# -- creating a session ---------------------------------------------------------------------

INSERT_SESSION = """
INSERT INTO pitrio_sessions (
    id, cwd, version, created_at, parent_session, header, modified_at,
    owner, owner_url, fence, lease_expires
) VALUES (
    %(id)s, %(cwd)s, %(version)s, %(created_at)s, %(parent_session)s, %(header)s::json,
    coalesce(%(created_at)s, now()),
    %(owner)s, %(owner_url)s, 1,
    CASE WHEN %(owner)s::text IS NULL THEN NULL
         ELSE clock_timestamp() + %(duration)s * interval '1 second' END
)
ON CONFLICT (id) DO NOTHING
RETURNING fence
"""
"""A new session row, its lease taken (fence 1) unless ``owner`` is null (an import)."""

# -- appends --------------------------------------------------------------------------------

APPEND = f"""
WITH owned AS (
    UPDATE pitrio_sessions SET
        last_seq = %(last_seq)s,
        modified_at = greatest(modified_at, coalesce(%(modified)s, modified_at)),
        message_count = message_count + %(messages)s,
        first_message = coalesce(first_message, %(first_message)s),
        name = CASE WHEN %(name_set)s THEN %(name)s ELSE name END
    WHERE id = %(session_id)s AND fence = %(fence)s AND last_seq = %(first_seq)s - 1
    RETURNING id
), added AS (
    INSERT INTO pitrio_entries (
        session_id, seq, entry_id, parent_id, type, created_at, payload
    )
    SELECT owned.id, e.seq, e.entry_id, e.parent_id, e.type, e.created_at, e.payload::json
    FROM owned, unnest(
        %(seqs)s::bigint[], %(entry_ids)s::text[], %(parent_ids)s::text[], %(types)s::text[],
        %(created)s::timestamptz[], %(payloads)s::text[]
    ) AS e(seq, entry_id, parent_id, type, created_at, payload)
    RETURNING 1
)
SELECT (SELECT count(*) FROM added), pg_notify('{NOTIFY_CHANNEL}', %(note)s) FROM owned
"""
"""One batch in one statement (one round trip, one transaction): the session row is updated
only while the fence is the writer's and the sequence continues where the batch starts (the
row lock also orders the batch against a take-over); the entries are inserted only through
that row; the notification goes out at commit, with the entries."""

APPEND_STATE = "SELECT fence, last_seq, owner FROM pitrio_sessions WHERE id = %(session_id)s"
"""What a refused (or uncertain) append compares against."""

# -- leases ---------------------------------------------------------------------------------

ACQUIRE = """
UPDATE pitrio_sessions AS s SET
    owner = %(owner)s,
    owner_url = %(owner_url)s,
    fence = s.fence + 1,
    lease_expires = clock_timestamp() + %(duration)s * interval '1 second'
FROM (
    SELECT owner AS previous FROM pitrio_sessions WHERE id = %(session_id)s FOR UPDATE
) AS old
WHERE s.id = %(session_id)s AND (
    s.owner IS NULL OR s.owner = %(owner)s OR s.lease_expires IS NULL
    OR s.lease_expires <= clock_timestamp() OR %(take_over)s
)
RETURNING s.fence, old.previous
"""
"""Take the lease: free, ours already (a restarted session tree of the same daemon), expired,
or forced. The fence grows, so whoever held it before can no longer append."""

LEASE_HOLDER = """
SELECT owner, owner_url, fence,
       extract(epoch FROM (lease_expires - clock_timestamp()))::float8
FROM pitrio_sessions WHERE id = %(session_id)s
"""

RENEW = """
UPDATE pitrio_sessions
SET lease_expires = clock_timestamp() + %(duration)s * interval '1 second'
WHERE id = %(session_id)s AND fence = %(fence)s AND owner = %(owner)s
RETURNING fence
"""

RELEASE = """
UPDATE pitrio_sessions SET owner = NULL, owner_url = NULL, lease_expires = NULL
WHERE id = %(session_id)s AND fence = %(fence)s
"""

# -- reading --------------------------------------------------------------------------------

LOAD_HEADER = "SELECT header::text, last_seq FROM pitrio_sessions WHERE id = %(session_id)s"
LOAD_ENTRIES = """
SELECT seq, payload::text FROM pitrio_entries
WHERE session_id = %(session_id)s AND seq <= %(upto)s ORDER BY seq
"""
ENTRIES_SINCE = """
SELECT seq, payload::text FROM pitrio_entries
WHERE session_id = %(session_id)s AND seq > %(since)s ORDER BY seq LIMIT %(limit)s
"""
LAST_SEQS = "SELECT id, last_seq FROM pitrio_sessions WHERE id = ANY(%(ids)s::text[])"

FIND = "SELECT cwd FROM pitrio_sessions WHERE id = %(session_id)s"
LIST = """
SELECT id, cwd, name, parent_session, created_at, modified_at, message_count, first_message,
       owner, owner_url, lease_expires > clock_timestamp()
FROM pitrio_sessions ORDER BY modified_at DESC
"""
DELETE = "DELETE FROM pitrio_sessions WHERE id = %(session_id)s"
