"""Which files a summarized stretch of conversation read and changed (spec §3.8.7). Pure.

Summaries of compacted history and of abandoned branches end with the files the work touched,
so the model keeps knowing them after the tool calls themselves are gone. The lists carry over
from one summary to the next through the entries' ``details``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from pitrio.actors.supervisor._text import js_sort_key
from pitrio.messages.agent import AgentMessage, AssistantMessage

READ_TOOL = "read"
WRITE_TOOL = "write"
EDIT_TOOL = "edit"


@attrs.frozen
class FileOperations:
    """Paths read, written and edited, as sets."""

    read: frozenset[str] = frozenset()
    written: frozenset[str] = frozenset()
    edited: frozenset[str] = frozenset()

    def with_messages(self, messages: Iterable[AgentMessage]) -> FileOperations:
        """Add the paths of the ``read``/``write``/``edit`` tool calls made in ``messages``."""
        read, written, edited = set(self.read), set(self.written), set(self.edited)
        for message in messages:
            if not isinstance(message, AssistantMessage):
                continue
            for call in message.tool_calls:
                path = call.arguments.get("path") if isinstance(call.arguments, dict) else None
                if not isinstance(path, str):
                    continue
                if call.name == READ_TOOL:
                    read.add(path)
                elif call.name == WRITE_TOOL:
                    written.add(path)
                elif call.name == EDIT_TOOL:
                    edited.add(path)
        return FileOperations(frozenset(read), frozenset(written), frozenset(edited))

    def with_details(self, details: Any) -> FileOperations:
        """Add the lists an earlier summary recorded in its ``details`` (read, and modified).

        Modified files count as edited, so they stay modified in the next summary.
        """
        if not isinstance(details, Mapping):
            return self
        read = _strings(details.get("readFiles"))
        modified = _strings(details.get("modifiedFiles"))
        return FileOperations(self.read | read, self.written, self.edited | modified)

    def file_lists(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(read_files, modified_files)``: modified = written or edited; read = the rest.

        Both sorted as JavaScript sorts strings, so the lists match pi's byte for byte.
        """
        modified = self.written | self.edited
        read_only = self.read - modified
        return (
            tuple(sorted(read_only, key=js_sort_key)),
            tuple(sorted(modified, key=js_sort_key)),
        )

    def details(self) -> dict[str, list[str]]:
        """The ``details`` object a summary entry stores (``readFiles``, ``modifiedFiles``)."""
        read_files, modified_files = self.file_lists()
        return {"readFiles": list(read_files), "modifiedFiles": list(modified_files)}


def _strings(value: Any) -> frozenset[str]:
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(item for item in value if isinstance(item, str))


def format_file_lists(read_files: Iterable[str], modified_files: Iterable[str]) -> str:
    """The text appended to a summary: ``<read-files>`` / ``<modified-files>`` sections.

    Empty sections are left out; with none, the result is empty. Otherwise it starts with a
    blank line so it can be appended to the summary as is.
    """
    sections: list[str] = []
    read = list(read_files)
    modified = list(modified_files)
    if read:
        sections.append("<read-files>\n" + "\n".join(read) + "\n</read-files>")
    if modified:
        sections.append("<modified-files>\n" + "\n".join(modified) + "\n</modified-files>")
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)
