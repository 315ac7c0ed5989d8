"""A second implementation of the session store: PostgreSQL, shared by several daemons.

Pure cores: :mod:`.schema` (versioned migrations), :mod:`.sql` (statements), :mod:`.rows`
(entries and headers as rows, listings), :mod:`.lease` (identity, terms, counters). I/O:
:mod:`.database` (pool, worker threads, connection loss), :mod:`.listener` (the LISTEN
thread). Shells: :mod:`.store` (the store actor, the file store's handle) and :mod:`.backend`
(what a daemon uses: open by id, list, delete, watch, export/import, metrics).

Nothing here is imported by the base install: the modules that need ``psycopg`` (the
``postgres`` extra) are imported only when a ``postgresql://`` store is chosen.
"""
