"""The SDK's surface for transports: the handles, options and errors they drive actors with.

Transports (``pitrio/transports/``) reach the actors only through :mod:`pitrio` and these
modules (``DESIGN.md`` §1); no transport imports ``pitrio.actors``. Each module names what one
kind of transport needs and nothing more; the actors stay free to move their code, and only
these re-exports follow.

* :mod:`.session`: one session's handle, its options, the replies and errors of its commands,
  the runtime that replaces a session (RPC mode), the ``seq``-numbered event items.
* :mod:`.host`: the daemon's host, its config and policies, a hosted session and its clients.
* :mod:`.models`: the model router, its config and handle, the faux provider.
* :mod:`.store`: where sessions live on disk, listing, resolving, checking and repairing them.
* :mod:`.tools`: the tool executor's ledger of process groups (reaped at daemon start).
* :mod:`.streams`: reading a transport's input stream.
* :mod:`.mcp`: the ``--mcp-config`` flag of the command line (MCP servers, issue 26);
  :mod:`.mcp_manage`: ``mcp.json`` files and server checks for ``pitrio mcp`` (issue 35).
* :mod:`.postgres` and :mod:`.trace` load optional or rarely needed code: import them inside
  the function that needs them, as the transports do, so a plain start never pays for them.

This package imports none of its modules itself, so a transport loads only the modules of the
SDK it names (and through them about the same actors' modules as before it had an SDK:
``DESIGN-NOTES.md``, issue 22).
"""
