"""Compaction policy, where to cut (spec §3.8.4-§3.8.5): the cut point (split turns included)
and the preparation of what is summarized and what is kept verbatim. Pure."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pitrio.actors.supervisor._entries import (
    Edits,
    collect_edits,
    entry_message,
    iso_to_ms,
    last_compaction_index,
    project_path,
)
from pitrio.actors.supervisor.compaction_measure import (
    ALREADY_COMPACTED,
    NOTHING_TO_COMPACT,
    CompactionSettings,
    estimate_context_tokens,
    estimate_tokens,
)
from pitrio.actors.supervisor.file_ops import FileOperations
from pitrio.messages.agent import (
    AgentMessage,
    BashExecutionMessage,
)
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)

# --- cut point (§3.8.4) ----------------------------------------------------------------------

_CUT_ROLES = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)


def is_valid_cut_point(entry: SessionEntry) -> bool:
    """Whether the kept part of a compaction may start at ``entry``.

    Any message but a tool result (which must stay with its call), and custom-message and
    branch-summary entries.
    """
    if isinstance(entry, MessageEntry):
        return entry.message.role in _CUT_ROLES
    return isinstance(entry, BranchSummaryEntry | CustomMessageEntry)


def _is_turn_start(entry: SessionEntry) -> bool:
    if isinstance(entry, MessageEntry):
        return entry.message.role in ("user", "bashExecution")
    return isinstance(entry, BranchSummaryEntry | CustomMessageEntry)


def entry_tokens(entry: SessionEntry, edits: Edits | None = None) -> int:
    """Estimated tokens ``entry`` puts in the model's context (0 if it puts none there)."""
    message = entry_message(entry, edits)
    if message is None:
        return 0
    if isinstance(message, BashExecutionMessage) and message.exclude_from_context:
        return 0
    return estimate_tokens(message)


@attrs.frozen(kw_only=True)
class CutPoint:
    """Where a compaction cuts: the first kept entry, and the turn it splits if it splits one."""

    first_kept_entry_index: int
    turn_start_index: int
    """Start of the split turn, or -1 when the cut falls between turns."""
    is_split_turn: bool


def find_turn_start_index(entries: Sequence[SessionEntry], index: int, start: int) -> int:
    """The nearest turn start at or before ``index`` (not before ``start``), or -1."""
    for i in range(index, start - 1, -1):
        if _is_turn_start(entries[i]):
            return i
    return -1


def find_cut_point(
    entries: Sequence[SessionEntry], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """Choose the first kept entry in ``entries[start:end]`` (spec §3.8.4).

    Walking back from the end, the cut lands on the first valid cut point at or after the
    entry where the kept tokens reach ``keep_recent_tokens``; with no such entry it stays at
    the first valid cut point. Non-message entries right before the cut (settings changes,
    labels, custom entries, ...) are kept with it. A cut on anything but a user message
    splits a turn; the turn's start is reported so its beginning can be summarized apart.
    """
    cut_points = [i for i in range(start, end) if is_valid_cut_point(entries[i])]
    if not cut_points:
        return CutPoint(first_kept_entry_index=start, turn_start_index=-1, is_split_turn=False)
    edits = collect_edits(entries)
    cut_index = cut_points[0]
    kept = 0
    for i in range(end - 1, start - 1, -1):
        kept += entry_tokens(entries[i], edits)
        if kept >= keep_recent_tokens:
            cut_index = next((c for c in cut_points if c >= i), cut_index)
            break
    while cut_index > start and not isinstance(
        entries[cut_index - 1], MessageEntry | CompactionEntry
    ):
        cut_index -= 1
    first = entries[cut_index]
    if isinstance(first, MessageEntry) and first.message.role == "user":
        return CutPoint(first_kept_entry_index=cut_index, turn_start_index=-1, is_split_turn=False)
    turn_start = find_turn_start_index(entries, cut_index, start)
    return CutPoint(
        first_kept_entry_index=cut_index,
        turn_start_index=turn_start,
        is_split_turn=turn_start != -1,
    )


# --- preparation (§3.8.5) --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CompactionPreparation:
    """Everything a compaction needs before the summary call (pi's ``CompactionPreparation``)."""

    first_kept_entry_id: str
    messages_to_summarize: tuple[AgentMessage, ...]
    turn_prefix_messages: tuple[AgentMessage, ...]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOperations
    settings: CompactionSettings


def _messages_between(
    entries: Sequence[SessionEntry], start: int, end: int, edits: Edits
) -> tuple[AgentMessage, ...]:
    # Compaction entries are skipped: an earlier summary travels as ``previous_summary``.
    return tuple(m for e in entries[start:end] if (m := entry_message(e, edits)) is not None)


def prepare_compaction(
    path_entries: Sequence[SessionEntry],
    settings: CompactionSettings,
    *,
    context_messages: Sequence[AgentMessage] | None = None,
) -> CompactionPreparation | None:
    """Plan a compaction of the branch ``path_entries`` (root to leaf), or ``None``.

    ``None`` when the branch already ends with a compaction or has no entry to keep. An
    earlier compaction's kept entries are summarized again together with its summary (pi
    0.73.1). ``tokens_before`` estimates the current context; pass the session's projection as
    ``context_messages`` when it has one, else it is rebuilt from ``path_entries``.
    """
    if not path_entries or isinstance(path_entries[-1], CompactionEntry):
        return None
    previous_at = last_compaction_index(path_entries)
    boundary_start = 0
    previous_summary: str | None = None
    file_ops = FileOperations()
    if previous_at >= 0:
        previous = path_entries[previous_at]
        assert isinstance(previous, CompactionEntry)
        previous_summary = previous.summary
        boundary_start = next(
            (i for i, e in enumerate(path_entries) if e.id == previous.first_kept_entry_id),
            previous_at + 1,
        )
        if previous.from_hook is not True:
            # Lists written by an extension are not ours to carry forward.
            file_ops = file_ops.with_details(previous.details)
    if context_messages is None:
        context_messages = project_path(path_entries)
    tokens_before = estimate_context_tokens(context_messages).tokens

    cut = find_cut_point(
        path_entries, boundary_start, len(path_entries), settings.keep_recent_tokens
    )
    if cut.first_kept_entry_index >= len(path_entries):
        return None
    first_kept = path_entries[cut.first_kept_entry_index]
    if not first_kept.id:
        return None  # an id-less entry: the file needs migrating first
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    edits = collect_edits(path_entries)
    to_summarize = _messages_between(path_entries, boundary_start, history_end, edits)
    prefix: tuple[AgentMessage, ...] = ()
    if cut.is_split_turn:
        prefix = _messages_between(
            path_entries, cut.turn_start_index, cut.first_kept_entry_index, edits
        )
    file_ops = file_ops.with_messages(to_summarize).with_messages(prefix)
    return CompactionPreparation(
        first_kept_entry_id=first_kept.id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        settings=settings,
    )


def manual_compaction_refusal(path_entries: Sequence[SessionEntry]) -> str:
    """Why a manual compaction has nothing to do (when :func:`prepare_compaction` gave ``None``)."""
    if path_entries and isinstance(path_entries[-1], CompactionEntry):
        return ALREADY_COMPACTED
    return NOTHING_TO_COMPACT


def latest_compaction_ms(path_entries: Sequence[SessionEntry]) -> int | None:
    """Unix milliseconds of the branch's latest compaction entry, or ``None``."""
    index = last_compaction_index(path_entries)
    return iso_to_ms(path_entries[index].timestamp) if index >= 0 else None
