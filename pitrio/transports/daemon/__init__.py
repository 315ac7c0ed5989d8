"""``pitrio serve``: the daemon's transports (HTTP page, websocket endpoints, security).

:mod:`.server` listens and routes, :mod:`.sockets` serves the two websocket endpoints over
:mod:`.websocket` (trio-websocket, failing bad connections as RFC 6455 says) and sees the
daemon through :mod:`.context`; :mod:`.follower` serves a session another daemon owns;
:mod:`.security`, :mod:`.http`, :mod:`.metrics` and :mod:`.frames` are pure helpers, ``web/``
holds the static page. :mod:`pitrio.transports.serve` runs it all as a process.
"""
