"""Session file lines: the header and every entry type (spec §4.2-§4.5).

Entries form a tree through ``parent_id``; ``timestamp`` is an ISO-8601 string. Every class
keeps unknown keys in ``extra`` so a rewrite loses nothing pi (or a newer pi) wrote.
"""

from __future__ import annotations

import datetime
import os
import secrets
import time
from typing import Any, Literal

import attrs

from pitrio.messages.agent import AgentMessage, SystemCheckpoint, Usage
from pitrio.messages.codec import extra_field, tag
from pitrio.messages.content import ImageContent, TextContent, UserContent

CURRENT_SESSION_VERSION = 3


def iso_now() -> str:
    """The current UTC time as pi writes entry timestamps (``2026-01-02T03:04:05.678Z``)."""
    return iso_stamp(datetime.datetime.now(datetime.UTC))


def iso_stamp(moment: datetime.datetime) -> str:
    """``moment`` (aware, in UTC) as an entry timestamp: milliseconds cut, not rounded."""
    # isoformat, not strftime: the C library's strftime consults the time zone (two stats
    # of /etc/localtime without TZ) at every call. In the RPC agent's turn, which stamps two
    # entries, a stamp took 32-39 us of CPU, 23-24 us this way (issue 38).
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"  # "+00:00" -> "Z"


def new_entry_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
    """A fresh 8-hex-digit entry id not in ``taken`` (a full hex id after 100 collisions)."""
    for _ in range(100):
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate
    return secrets.token_hex(16)


def new_session_id() -> str:
    """A time-ordered UUID v7 string, as pi names sessions."""
    unix_ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (unix_ms & ((1 << 48) - 1)) << 80  # 48-bit timestamp
    value |= 0x7 << 76  # version 7
    value |= ((rand >> 62) & 0xFFF) << 64  # 12 random bits
    value |= 0b10 << 62  # RFC 4122 variant
    value |= rand & ((1 << 62) - 1)  # 62 random bits
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@attrs.frozen(kw_only=True)
class SessionHeader:
    """First line of a session file; not part of the entry tree.

    ``provider``/``model_id``/``thinking_level`` appear only in version-1 headers.
    """

    type: Literal["session"] = tag("session")
    version: int | None = None
    id: str
    timestamp: str
    cwd: str
    parent_session: str | None = None
    provider: str | None = None
    model_id: str | None = None
    thinking_level: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class MessageEntry:
    """A transcript message (user, assistant, toolResult, bashExecution, ...)."""

    type: Literal["message"] = tag("message")
    id: str
    parent_id: str | None
    timestamp: str
    message: AgentMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ThinkingLevelChangeEntry:
    """The thinking level changed from here on."""

    type: Literal["thinking_level_change"] = tag("thinking_level_change")
    id: str
    parent_id: str | None
    timestamp: str
    thinking_level: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ModelChangeEntry:
    """The model changed from here on."""

    type: Literal["model_change"] = tag("model_change")
    id: str
    parent_id: str | None
    timestamp: str
    provider: str
    model_id: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class CompactionEntry:
    """History before ``first_kept_entry_id`` is replaced by ``summary`` in the context."""

    type: Literal["compaction"] = tag("compaction")
    id: str
    parent_id: str | None
    timestamp: str
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    usage: Usage | None = None
    """What the summary requests cost (pi 1.6.0); absent on older entries and hook results."""
    from_hook: bool | None = None
    system_message: SystemCheckpoint | None = None
    """The prompt sections and tool declarations in force at the compaction (the replay of
    the system messages it folds away): the compacted context's leading system message."""
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class BranchSummaryEntry:
    """Summary of the branch the conversation came back from (``from_id`` or ``"root"``)."""

    type: Literal["branch_summary"] = tag("branch_summary")
    id: str
    parent_id: str | None
    timestamp: str
    from_id: str
    summary: str
    details: Any = None
    usage: Usage | None = None
    """The summarisation request's usage (pi 1.6.0)."""
    from_hook: bool | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class CustomEntry:
    """Extension state; never part of the model context.

    Field order is pi's key order for this entry: its own fields come before the id.
    """

    type: Literal["custom"] = tag("custom")
    custom_type: str
    data: Any = None
    id: str
    parent_id: str | None
    timestamp: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class CustomMessageEntry:
    """An extension message; reaches the model as a user message.

    Field order is pi's key order for this entry: its own fields come before the id.
    """

    type: Literal["custom_message"] = tag("custom_message")
    custom_type: str
    content: UserContent
    display: bool
    details: Any = None
    id: str
    parent_id: str | None
    timestamp: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class LabelEntry:
    """Sets (non-empty ``label``) or clears the label of ``target_id``."""

    type: Literal["label"] = tag("label")
    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    label: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SessionInfoEntry:
    """Names the session (the latest one in file order wins; empty clears)."""

    type: Literal["session_info"] = tag("session_info")
    id: str
    parent_id: str | None
    timestamp: str
    name: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ContentReplacement:
    """New content for a message whose other fields stay as they were."""

    content: str | tuple[TextContent | ImageContent, ...]
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ContextEditEntry:
    """Omits (``replacement`` null) or rewrites the content of ``target_id`` in the projection."""

    type: Literal["context_edit"] = tag("context_edit")
    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    replacement: ContentReplacement | None
    reason: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class UsageEntry:
    """Model usage outside the conversation's own requests (``kind`` such as ``cache_warm``);
    counted by the session's statistics, never part of the model context."""

    type: Literal["usage"] = tag("usage")
    id: str
    parent_id: str | None
    timestamp: str
    kind: str
    provider: str
    model: str
    usage: Usage
    note: str | None = None
    extra: dict[str, Any] | None = extra_field()


SessionEntry = (
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | ContextEditEntry
    | UsageEntry
)
"""Any entry of the session tree."""

FileLine = SessionHeader | SessionEntry
"""Any line of a session file."""


@attrs.frozen(kw_only=True)
class CompactionResult:
    """What a compaction produced (carried by ``compaction_end`` and the ``compact`` reply)."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    estimated_tokens_after: int | None = None
    """Estimated tokens of the context the compaction left (pi 1.6.0)."""
    usage: Usage | None = None
    """What the summary requests cost (pi 1.6.0)."""
    details: Any = None
    extra: dict[str, Any] | None = extra_field()
