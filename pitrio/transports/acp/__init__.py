"""``pitrio acp``: the Agent Client Protocol (v1) for editors, over stdio.

:mod:`jsonrpc` is the sans-IO JSON-RPC 2.0 codec (framing, ids, errors, the matching of the
agent's own requests with the client's responses); :mod:`messages` the ACP types pitrio sends,
as attrs classes mapped to ACP's JSON; :mod:`mapping` turns a session's RPC event lines into
ACP ``session/update`` notifications (pure); :mod:`bridge` drives one session through an
in-process RPC server (as the terminal chat does); :mod:`agent` is the trio shell serving
stdin/stdout.
"""
