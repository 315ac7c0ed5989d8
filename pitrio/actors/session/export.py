"""Exporting a session: a linear JSONL copy of the branch, or one self-contained HTML page.

Pure builders (bytes out), and the two exports the session actor calls, which read the store and
write what the builders made. The HTML page embeds the session as
JSON (header, every entry, the leaf, the system prompt, the tool schemas) and renders it with a
few lines of script, so it opens offline in any browser.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors.session_store.paths import session_file_name
from pitrio.actors.session_store.stored import UnknownEntry
from pitrio.actors.supervisor.actor.compactor import known_entries
from pitrio.errors import PitrioError
from pitrio.messages.codec import dumps, to_json
from pitrio.messages.entries import SessionEntry, SessionHeader, iso_now
from pitrio.messages.ostext import check_os_text

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle

EMPTY_EXPORT = "Nothing to export yet - start a conversation first"
IN_MEMORY_EXPORT = "Cannot export in-memory session to HTML"


class ExportError(PitrioError):
    """An export could not be written; the message names the path and the reason."""


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def write_export_sync(path: str, data: bytes) -> None:
    """Write ``data`` to ``path``: a new or existing regular file only.

    The file is opened without truncation and without blocking (a FIFO with no reader is
    refused at once instead of hanging), then checked: a device, FIFO or socket is refused,
    untouched, with an error naming it; only a regular file is cut to the new contents. Every
    ``OSError`` becomes an :class:`ExportError` naming the path.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        try:
            mode = os.stat(path).st_mode  # a FIFO without a reader fails with ENXIO: say so
        except OSError:
            mode = stat.S_IFREG
        reason = exc.strerror or str(exc) if stat.S_ISREG(mode) else f"it is {_kind(mode)}"
        raise ExportError(f"Cannot export to {path}: {reason}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ExportError(f"Cannot export to {path}: it is {_kind(mode)}")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise ExportError(f"Cannot export to {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


async def write_export(path: str, data: bytes) -> None:
    """:func:`write_export_sync` in a worker thread (a slow disk never holds the actor's
    loop)."""
    await trio.to_thread.run_sync(write_export_sync, path, data)


def default_jsonl_name(timestamp: str | None = None) -> str:
    """``session-<ISO timestamp with : and . as ->.jsonl``."""
    stamp = (timestamp or iso_now()).replace(":", "-").replace(".", "-")
    return f"session-{stamp}.jsonl"


def default_html_name(session_file_name: str) -> str:
    """``pitrio-session-<session file name without .jsonl>.html``."""
    stem = session_file_name[:-6] if session_file_name.endswith(".jsonl") else session_file_name
    return f"pitrio-session-{stem}.html"


def export_jsonl(header: SessionHeader, branch: Sequence[SessionEntry]) -> bytes:
    """A fresh header (now) and the branch's entries re-chained into one line of parents."""
    fresh = attrs.evolve(header, timestamp=iso_now(), parent_session=None)
    lines = [dumps(to_json(fresh))]
    parent: str | None = None
    for entry in branch:
        lines.append(dumps(to_json(attrs.evolve(entry, parent_id=parent))))
        parent = entry.id
    return b"\n".join(lines) + b"\n"


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       color: #1d1d1f; background: #fafafa; }}
.entry {{ border-left: 4px solid #ccc; margin: 0.8rem 0; padding: 0.4rem 0.9rem;
          background: #fff; border-radius: 4px; }}
.user {{ border-color: #2f6fdb; }} .assistant {{ border-color: #2a9d5c; }}
.toolResult {{ border-color: #b07d1a; }} .meta {{ border-color: #999; color: #555; }}
.role {{ font-weight: 600; font-size: 0.8rem; text-transform: uppercase; color: #666; }}
pre {{ white-space: pre-wrap; word-wrap: break-word; margin: 0.3rem 0; }}
.off {{ opacity: 0.55; }}
</style>
</head>
<body>
<h1>{title}</h1>
<div id="session"></div>
<script id="data" type="application/json">{data}</script>
<script>
const data = JSON.parse(document.getElementById("data").textContent);
const root = document.getElementById("session");
const onBranch = new Set();
const byId = new Map(data.entries.map(e => [e.id, e]));
for (let id = data.leafId; id && byId.has(id); id = byId.get(id).parentId) onBranch.add(id);
function text(content) {{
  if (typeof content === "string") return content;
  return (content || []).map(b => b.type === "text" ? b.text
    : b.type === "thinking" ? "[thinking] " + b.thinking
    : b.type === "toolCall" ? "[tool call] " + b.name + " " + JSON.stringify(b.arguments)
    : b.type === "image" ? "[image " + b.mimeType + "]" : "").join("\\n");
}}
for (const entry of data.entries) {{
  const box = document.createElement("div");
  let role = "meta", body = entry.type;
  if (entry.type === "message") {{
    const m = entry.message; role = m.role;
    body = m.role === "bashExecution" ? "$ " + m.command + "\\n" + m.output : text(m.content);
    if (m.errorMessage) body += "\\n[" + m.stopReason + "] " + m.errorMessage;
  }} else if (entry.type === "compaction" || entry.type === "branch_summary") {{
    body = entry.type + ":\\n" + entry.summary;
  }} else if (entry.type === "custom_message") {{
    body = text(entry.content);
  }}
  box.className = "entry " + role + (onBranch.has(entry.id) ? "" : " off");
  const head = document.createElement("div"); head.className = "role"; head.textContent = role;
  const pre = document.createElement("pre"); pre.textContent = body;
  box.append(head, pre); root.append(box);
}}
</script>
</body>
</html>
"""


def export_html(
    header: SessionHeader | None,
    entries: Sequence[Any],
    leaf_id: str | None,
    *,
    system_prompt: str,
    tools: Sequence[dict[str, Any]],
    title: str | None = None,
) -> bytes:
    """The session as one self-contained HTML page (entries of unknown type included).

    ``entries`` are decoded entries or their JSON objects as read (a file exported unopened);
    ``header`` is ``None`` only for an empty file, which then needs a ``title``.
    """
    payload = {
        "header": None if header is None else to_json(header),
        "entries": [_entry_json(e) for e in entries],
        "leafId": leaf_id,
        "systemPrompt": system_prompt,
        "tools": list(tools),
    }
    # "</" inside a script element would end it early; JSON allows the escaped form.
    # A lone surrogate in the session (pi keeps what its clients send) is written escaped in
    # the data, and as a character reference (shown as U+FFFD, as a browser shows it) in the
    # title.
    data = dumps(payload).decode().replace("</", "<\\/")
    name = title or f"Session {header.id if header is not None else ''}"
    import html  # here: html.entities costs a cold start ~2-5 ms (issue 38)

    return _PAGE.format(title=html.escape(name), data=data).encode("utf-8", "xmlcharrefreplace")


def _entry_json(entry: Any) -> Any:
    if isinstance(entry, dict):
        return entry
    return entry.data if isinstance(entry, UnknownEntry) else to_json(entry)


async def write_session_html(
    store: SessionStoreHandle, loop: AgentLoopHandle, output_path: str | None
) -> str:
    """Write the session as a self-contained HTML page; returns its path. A session kept in a
    database exports like a file's (its default name is the file name it would have)."""
    if output_path is not None:
        check_os_text(output_path, "outputPath")
    path = store.path
    if path is None:
        status = await store.status()
        if status.location is None:
            raise PitrioError(IN_MEMORY_EXPORT)
        if not status.persisted:
            raise PitrioError(EMPTY_EXPORT)
        header = store.header
        name = session_file_name(header.timestamp, header.id)
    elif not await trio.Path(path).exists():
        raise PitrioError(EMPTY_EXPORT)
    else:
        name = path.name
    state = await loop.state()
    page = export_html(
        store.header,
        await store.entries(),
        await store.leaf_id(),
        system_prompt=state.system_prompt,
        tools=[],
    )
    target = output_path or default_html_name(name)  # answered as given (pi: relative)
    await write_export(target, page)
    return target


async def write_session_jsonl(store: SessionStoreHandle, output_path: str | None) -> str:
    """Write the current branch as a new linear session file; returns its path."""
    if output_path is not None:
        check_os_text(output_path, "outputPath")
    branch = known_entries(await store.branch_entries())
    data = export_jsonl(store.header, branch)
    target = await trio.Path(output_path or default_jsonl_name()).absolute()
    await write_export(str(target), data)
    return str(target)
