"""Reading a transport's input stream: :func:`receiver` picks a direct read for a pipe (no
scheduler step when data is waiting) and the stream's own read otherwise."""

from __future__ import annotations

from pitrio.actors.direct_io import receiver

__all__ = ["receiver"]
