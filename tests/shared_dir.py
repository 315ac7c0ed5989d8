"""Where the workspace's read-only ``shared/`` folder is (pi's fixtures and tools).

It stands beside the repository. A clone made elsewhere (``git clone <repo> /tmp/x``) finds it
beside the repository it was cloned from, and ``PITRIO_SHARED_DIR`` names it outright: the
fixture tests then run, instead of failing or skipping for want of their files.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _origin_checkout(root: Path) -> Path | None:
    """The local repository ``root`` was cloned from, if it was cloned from a path."""
    try:
        url = subprocess.run(
            ["git", "-C", str(root), "config", "--get", "remote.origin.url"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:  # no git: only the other places count
        return None
    if url.startswith("file://"):
        url = url.removeprefix("file://")
    elif "://" in url or ":" in url.split("/")[0]:
        return None  # a remote host (https://, ssh, user@host:path): nothing local beside it
    if not url:
        return None
    path = Path(url).expanduser()
    return (path if path.is_absolute() else root / path).resolve()


def find_shared_dir(root: Path = ROOT, env: Mapping[str, str] = os.environ) -> Path:
    """``$PITRIO_SHARED_DIR``, else ``shared/`` beside the checkout ``root``, else beside the
    repository it was cloned from; the first candidate when none exists (tests report it)."""
    configured = env.get("PITRIO_SHARED_DIR")
    if configured:
        return Path(configured).expanduser()
    beside = root.parent / "shared"
    if beside.is_dir():
        return beside
    origin = _origin_checkout(root)
    if origin is not None and (origin.parent / "shared").is_dir():
        return origin.parent / "shared"
    return beside


SHARED = find_shared_dir()
FIXTURES = SHARED / "fixtures"
SESSIONS = FIXTURES / "sessions"
TRANSCRIPTS = FIXTURES / "transcripts"
TOOLS = SHARED / "tools"
