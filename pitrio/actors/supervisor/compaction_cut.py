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
    estimate_projected_context_tokens,
    estimate_tokens,
)
from pitrio.actors.supervisor.file_ops import FileOperations
from pitrio.messages.agent import (
    AgentMessage,
    BashExecutionMessage,
)
from pitrio.messages.entries import (
    CompactionEntry,
    ContextEditEntry,
    MessageEntry,
    SessionEntry,
)

# --- cut point (§3.8.4) ----------------------------------------------------------------------

_CUT_ROLES = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
_TURN_START_ROLES = frozenset(
    {"user", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)


def is_valid_cut_point(entry: SessionEntry, edits: Edits | None = None) -> bool:
    """Whether the kept part of a compaction may start at ``entry``.

    An entry the model sees (after ``edits``) as anything but a tool result (which must stay
    with its call): a message, a custom message, a branch summary. An omitted entry is none.
    """
    message = entry_message(entry, edits)
    return message is not None and message.role in _CUT_ROLES


def _is_turn_start(entry: SessionEntry, edits: Edits | None = None) -> bool:
    message = entry_message(entry, edits)
    return message is not None and message.role in _TURN_START_ROLES


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


def find_turn_start_index(
    entries: Sequence[SessionEntry], index: int, start: int, edits: Edits | None = None
) -> int:
    """The nearest turn start at or before ``index`` (not before ``start``), or -1."""
    for i in range(index, start - 1, -1):
        if _is_turn_start(entries[i], edits):
            return i
    return -1


def _is_recovery_omission_suffix(suffix: Sequence[SessionEntry], edits: Edits) -> bool:
    """Whether everything after a cut is a failed attempt left out of the context (with its
    ``context_edit`` omissions): a closed suffix holding at least one omitted assistant
    response, nothing the model sees, no compaction, and no edit that replaces the content of
    an entry outside it."""

    def visible(entry: SessionEntry) -> bool:
        return not isinstance(entry, ContextEditEntry) and entry_message(entry) is not None

    def omitted(entry: SessionEntry) -> bool:
        return visible(entry) and entry_message(entry, edits) is None

    omitted_ids = {e.id for e in suffix if omitted(e)}
    if any(
        isinstance(e, ContextEditEntry)
        and e.replacement is not None
        and e.target_id not in omitted_ids
        for e in suffix
    ):
        return False
    if not any(
        isinstance(e, MessageEntry) and e.message.role == "assistant" and omitted(e) for e in suffix
    ):
        return False
    return all(
        not isinstance(e, CompactionEntry) and (not visible(e) or omitted(e)) for e in suffix
    )


def find_cut_point(
    entries: Sequence[SessionEntry], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """Choose the first kept entry in ``entries[start:end]`` (spec §3.8.4, pi 1.6.0).

    Entries are read as the model sees them (through their context edits). Walking back from
    the end, the cut lands on the first valid cut point at or after the entry where the kept
    tokens reach ``keep_recent_tokens`` (the last cut point if none follows); with no such
    entry it stays at the first valid cut point. When the budget was reached and all that
    follows the cut is an omitted recovery attempt, the cut moves past the cut point (an
    overflow recovery then summarizes the whole visible context). Entries the model does not
    see right before the cut (settings changes, labels, custom entries, omitted attempts, ...)
    are kept with it. A cut on anything but a turn start splits a turn; the turn's start is
    reported so its beginning can be summarized apart.
    """
    edits = collect_edits(entries)
    cut_points = [i for i in range(start, end) if is_valid_cut_point(entries[i], edits)]
    if not cut_points:
        return CutPoint(first_kept_entry_index=start, turn_start_index=-1, is_split_turn=False)
    cut_index = cut_points[0]
    kept = 0
    exceeded = False
    for i in range(end - 1, start - 1, -1):
        tokens = entry_tokens(entries[i], edits)
        if tokens == 0:
            continue
        kept += tokens
        if kept >= keep_recent_tokens:
            exceeded = True
            cut_index = next((c for c in cut_points if c >= i), cut_points[-1])
            break
    if exceeded and _is_recovery_omission_suffix(entries[cut_index + 1 : end], edits):
        cut_index += 1
    while cut_index > start:
        previous = entries[cut_index - 1]
        if isinstance(previous, CompactionEntry) or entry_message(previous, edits) is not None:
            break
        cut_index -= 1
    if _is_turn_start(entries[cut_index], edits):
        return CutPoint(first_kept_entry_index=cut_index, turn_start_index=-1, is_split_turn=False)
    turn_start = find_turn_start_index(entries, cut_index, start, edits)
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
    # Compaction entries are skipped: an earlier summary travels as ``previous_summary``. So
    # are system messages (pi 1.6.0): they are the prompt, not the conversation, and a
    # compaction entry carries them as its systemMessage checkpoint.
    return tuple(
        m
        for e in entries[start:end]
        if (m := entry_message(e, edits)) is not None and m.role != "system"
    )


def prepare_compaction(
    path_entries: Sequence[SessionEntry],
    settings: CompactionSettings,
    *,
    context_messages: Sequence[AgentMessage] | None = None,
) -> CompactionPreparation | None:
    """Plan a compaction of the branch ``path_entries`` (root to leaf), or ``None``.

    ``None`` when the branch already ends with a compaction, has no entry to keep, or has
    nothing before the kept part to summarize (pi 1.6.0's "Nothing to compact"). An
    earlier compaction's kept entries are summarized again together with its summary (pi
    0.73.1). ``tokens_before`` estimates the current context as pi 1.6.0 does (usage only when
    nothing changed the context after it was measured); pass the session's projection as
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
    tokens_before = estimate_projected_context_tokens(path_entries, context_messages)

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
    if not to_summarize and not prefix:
        # pi 1.6.0: nothing before the kept part (the whole context fits the kept budget) is
        # nothing to compact, not an empty summary.
        return None
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
