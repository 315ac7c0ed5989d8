"""Output files: what a tool writes so the model can reach output it was not shown in full.

Like pi 1.6.0's, every such file is ``<tmp>/<prefix>-<16 hex><extension>``, created new
(``O_EXCL``, never through a link someone else placed there) and readable by the user only.
"""

from __future__ import annotations

import os
import secrets
import tempfile


def write_output_file(prefix: str, extension: str, data: bytes) -> str:
    """Write ``data`` to a new private temporary file; its path."""
    path = os.path.join(tempfile.gettempdir(), f"{prefix}-{secrets.token_hex(8)}{extension}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    return path
