"""``pitrio serve``: the daemon's transports (HTTP page, websocket endpoints, security).

:mod:`.server` listens and routes, :mod:`.sockets` serves the two websocket endpoints,
:mod:`.security`, :mod:`.http`, :mod:`.metrics` and :mod:`.frames` are pure helpers, ``web/``
holds the static page. :mod:`pitrio.transports.serve` runs it all as a process.
"""
