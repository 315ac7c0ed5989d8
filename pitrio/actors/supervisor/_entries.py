"""Reading session entries the way the model sees them: messages, context edits, projection.

The supervisor works on the entries of one branch (root to leaf). These helpers turn entries
into the agent messages they stand for (spec §4.9 step 4), apply ``context_edit`` entries
(§4.5.1) and rebuild the projected context of a path, so the policies can measure exactly
what reaches the model without asking the session store.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence

import attrs

from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.content import TextContent, ToolCall
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)

Edits = Mapping[str, ContentReplacement | None]
"""Context edits by target entry id: ``None`` omits the target, otherwise its new content."""


def iso_to_ms(timestamp: str) -> int:
    """Unix milliseconds of an entry's ISO timestamp (``Date.parse``); 0 if unparseable."""
    try:
        parsed = datetime.datetime.fromisoformat(timestamp)
    except ValueError:
        return 0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


def collect_edits(entries: Iterable[SessionEntry]) -> dict[str, ContentReplacement | None]:
    """The context edits among ``entries``; for one target the latest edit wins."""
    edits: dict[str, ContentReplacement | None] = {}
    for entry in entries:
        if isinstance(entry, ContextEditEntry):
            edits[entry.target_id] = entry.replacement
    return edits


def _replace_content(message: AgentMessage, replacement: ContentReplacement) -> AgentMessage:
    # Only the content changes; string content becomes one text block, as the projection does.
    content = replacement.content
    blocks = (TextContent(text=content),) if isinstance(content, str) else content
    match message:
        case UserMessage() | CustomMessage():
            return attrs.evolve(message, content=blocks)
        case ToolResultMessage():
            return attrs.evolve(message, content=blocks)
        case AssistantMessage():
            texts = tuple(block for block in blocks if isinstance(block, TextContent))
            return attrs.evolve(message, content=texts)
    return message


def entry_message(entry: SessionEntry, edits: Edits | None = None) -> AgentMessage | None:
    """The message ``entry`` contributes to the context, after ``edits``; ``None`` if none.

    ``message`` entries give their message, ``custom_message`` entries a custom message and
    ``branch_summary`` entries with a non-empty summary a branch-summary message. Compaction
    entries are not mapped here: their summary only leads the projection (§4.9 step 6).
    """
    message: AgentMessage | None
    match entry:
        case MessageEntry():
            message = entry.message
        case CustomMessageEntry():
            message = CustomMessage(
                custom_type=entry.custom_type,
                content=entry.content,
                display=entry.display,
                details=entry.details,
                timestamp=iso_to_ms(entry.timestamp),
            )
        case BranchSummaryEntry() if entry.summary:
            message = BranchSummaryMessage(
                summary=entry.summary, from_id=entry.from_id, timestamp=iso_to_ms(entry.timestamp)
            )
        case _:
            return None
    if edits and entry.id in edits:
        replacement = edits[entry.id]
        if replacement is None:
            return None
        message = _replace_content(message, replacement)
    return message


def compaction_message(entry: CompactionEntry) -> CompactionSummaryMessage:
    """The summary message a compaction entry puts at the head of the context."""
    return CompactionSummaryMessage(
        summary=entry.summary,
        tokens_before=entry.tokens_before,
        timestamp=iso_to_ms(entry.timestamp),
    )


def last_compaction_index(entries: Sequence[SessionEntry]) -> int:
    """Index of the last compaction entry of ``entries``, or -1."""
    for index in range(len(entries) - 1, -1, -1):
        if isinstance(entries[index], CompactionEntry):
            return index
    return -1


def project_path(path_entries: Sequence[SessionEntry]) -> list[AgentMessage]:
    """The context messages of a branch (root to leaf), as pi's projection builds them.

    With a compaction on the path: its summary, then the entries before it from
    ``first_kept_entry_id`` (none if that id is not on the path), then the entries after it.
    Context edits are taken from the entries that survive that trimming.
    """
    compaction_at = last_compaction_index(path_entries)
    if compaction_at < 0:
        edits = collect_edits(path_entries)
        return [m for e in path_entries if (m := entry_message(e, edits)) is not None]
    compaction = path_entries[compaction_at]
    assert isinstance(compaction, CompactionEntry)
    kept: list[SessionEntry] = []
    found = False
    for entry in path_entries[:compaction_at]:
        found = found or entry.id == compaction.first_kept_entry_id
        if found:
            kept.append(entry)
    kept.extend(path_entries[compaction_at + 1 :])
    edits = collect_edits(kept)
    messages: list[AgentMessage] = [compaction_message(compaction)]
    messages.extend(m for e in kept if (m := entry_message(e, edits)) is not None)
    return messages


def path_to(by_id: Mapping[str, SessionEntry], leaf_id: str | None) -> list[SessionEntry]:
    """The entries from the root to ``leaf_id`` following ``parent_id`` (empty for ``None``).

    A cycle or a missing parent ends the walk, so a damaged file still gives a path.
    """
    path: list[SessionEntry] = []
    seen: set[str] = set()
    current = leaf_id
    while current is not None and current not in seen:
        entry = by_id.get(current)
        if entry is None:
            break
        seen.add(current)
        path.append(entry)
        current = entry.parent_id
    path.reverse()
    return path


def recovery_omission_targets(
    failed_entry_id: str, failed: AssistantMessage, path: Iterable[object]
) -> tuple[str, ...]:
    """The entries a retried or overflow-recovered attempt leaves the context with (pi 1.6.0's
    ``_omitRecoveryAttempt``): the failed response's entry, then the entries of its tool
    results that follow it on ``path`` (up to the next assistant message), so no result is
    left without its call. Each gets a ``context_edit`` omission, in this order. ``path`` may
    hold entries of types this version does not know; they are passed over."""
    call_ids = {block.id for block in failed.content if isinstance(block, ToolCall)}
    targets = [failed_entry_id]
    if not call_ids:
        return tuple(targets)
    after = False
    for entry in path:
        if not isinstance(entry, MessageEntry):
            continue
        if not after:
            after = entry.id == failed_entry_id
            continue
        message = entry.message
        if isinstance(message, AssistantMessage):
            break
        if isinstance(message, ToolResultMessage) and message.tool_call_id in call_ids:
            targets.append(entry.id)
    return tuple(targets)
