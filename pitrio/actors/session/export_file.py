"""``pitrio --export FILE [OUTPUT]``: a session file on disk as one HTML page, no session opened.

pi 1.6.0's ``--export`` reads the file, writes the page and exits: no model, no agent, no
extension runs. The page is :func:`~pitrio.actors.session.export.export_html`'s, built from the
file's own lines (an entry pitrio cannot decode is shown as written, as the running session's
export shows it). A file that is not a session is refused with the reason; an empty file makes
an empty page, as pi makes one.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from pitrio.actors.session.export import (
    ExportError,
    default_html_name,
    export_html,
    write_export_sync,
)
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.messages.ostext import check_os_text

NOT_A_SESSION = "Session file is not a valid pi session: {path}"


def export_file_html(source: str, output: str | None = None) -> str:
    """Write the session file ``source`` as an HTML page to ``output`` (default: the page name
    a running session's export gives, in the current directory); returns the path written.

    Raises :class:`ExportError` naming the file: missing or unreadable, not a session, or an
    output that cannot be written.
    """
    check_os_text(source, "--export")
    if output is not None:
        check_os_text(output, "--export output")
    try:
        data = Path(source).read_bytes()
    except FileNotFoundError:
        raise ExportError(f"File not found: {os.path.abspath(source)}") from None
    except OSError as exc:
        raise ExportError(f"Cannot read {source}: {exc.strerror or exc}") from None
    parsed = parse_session_bytes(data, origin=source)
    if not parsed.empty and parsed.header is None:
        raise ExportError(NOT_A_SESSION.format(path=os.path.abspath(source)))
    entries = [orjson.loads(stored.raw) for stored in parsed.entries]
    leaf = parsed.entries[-1].id if parsed.entries else None
    page = export_html(
        parsed.header,
        entries,
        leaf,
        system_prompt="",
        tools=[],
        title=None if parsed.header is not None else "Session",
    )
    target = output or default_html_name(os.path.basename(source))
    write_export_sync(target, page)
    return target
