"""Branch summaries for tree navigation (spec §3.9). Pure: no trio, no I/O.

When the user moves the leaf to another point of the session tree, the part of the old branch
that is being left can be summarized into a ``branch_summary`` entry placed at the new leaf.
This module decides which entries that is, which messages fit the summarizer's budget, what
the request says, where the new leaf goes, and how the final summary text reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from pitrio.actors.supervisor import prompts
from pitrio.actors.supervisor._entries import compaction_message, entry_message, path_to
from pitrio.actors.supervisor._settings import int_setting
from pitrio.actors.supervisor.compaction import (
    ADDITIONAL_FOCUS,
    SummaryRequest,
    conversation_block,
    estimate_tokens,
)
from pitrio.actors.supervisor.file_ops import FileOperations, format_file_lists
from pitrio.errors import SummarizationError
from pitrio.messages.agent import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import TextContent, text_of
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)

DEFAULT_RESERVE_TOKENS = 16384
# The window assumed when the model does not say how large its window is.
FALLBACK_CONTEXT_WINDOW = 128000
# A summary entry over budget is still taken while the total is under this share of it.
SUMMARY_OVERRUN_SHARE = 0.9

BRANCH_SUMMARY_PREAMBLE = (
    "The user explored a different conversation branch before returning here.\n"
    "Summary of that exploration:\n\n"
)
NO_CONTENT_TO_SUMMARIZE = "No content to summarize"
SUMMARIZATION_FAILED = "Summarization failed"
NO_SUMMARY_MODEL = "No model available for summarization"


@attrs.frozen(kw_only=True)
class BranchSummarySettings:
    """The ``branchSummary.*`` settings (spec §8.2)."""

    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    skip_prompt: bool = False

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> BranchSummarySettings:
        """Read the ``branchSummary`` object of settings.json; bad keys keep defaults."""
        if not value:
            return cls()
        skip = value.get("skipPrompt", False)
        return cls(
            reserve_tokens=int_setting(value.get("reserveTokens"), DEFAULT_RESERVE_TOKENS),
            skip_prompt=skip if isinstance(skip, bool) else False,
        )


def token_budget(context_window: int | None, settings: BranchSummarySettings) -> int:
    """Tokens of conversation the summarizer may be given: the window minus the reserve."""
    return (context_window or FALLBACK_CONTEXT_WINDOW) - settings.reserve_tokens


@attrs.frozen(kw_only=True)
class BranchEntries:
    """The entries of the branch being left (oldest first) and where it meets the target."""

    entries: tuple[SessionEntry, ...]
    common_ancestor_id: str | None


def collect_entries_for_branch_summary(
    by_id: Mapping[str, SessionEntry], old_leaf_id: str | None, target_id: str
) -> BranchEntries:
    """The entries from the old leaf back to (not including) the deepest common ancestor.

    If the target lies on the old branch, the target itself is that ancestor, so only what
    came after it is summarized. Compaction entries are included: their summaries are part
    of what the branch knew.
    """
    if old_leaf_id is None:
        return BranchEntries(entries=(), common_ancestor_id=None)
    target_path = {entry.id for entry in path_to(by_id, target_id)}
    old_path = path_to(by_id, old_leaf_id)
    common: str | None = None
    for entry in reversed(old_path):
        if entry.id in target_path:
            common = entry.id
            break
    collected: list[SessionEntry] = []
    for entry in reversed(old_path):
        if entry.id == common:
            break
        collected.append(entry)
    collected.reverse()
    return BranchEntries(entries=tuple(collected), common_ancestor_id=common)


def _branch_message(entry: SessionEntry) -> AgentMessage | None:
    # Tool results are left out: the assistant's tool call already says what was done.
    if isinstance(entry, MessageEntry):
        return None if isinstance(entry.message, ToolResultMessage) else entry.message
    if isinstance(entry, CompactionEntry):
        return compaction_message(entry)
    if isinstance(entry, CustomMessageEntry | BranchSummaryEntry):
        return entry_message(entry)
    return None


@attrs.frozen(kw_only=True)
class BranchPreparation:
    """The messages a branch summary is made from, their file operations and token total."""

    messages: tuple[AgentMessage, ...]
    file_ops: FileOperations
    total_tokens: int


def prepare_branch_entries(entries: Sequence[SessionEntry], budget: int) -> BranchPreparation:
    """Pick the newest messages of ``entries`` that fit ``budget`` tokens (``<= 0``: all).

    File lists of earlier branch summaries carry over whatever fits. When the next message
    would overflow the budget, a summary entry is still taken while the total is under 90 %
    of it (it condenses much more than its size), then the walk stops.
    """
    file_ops = FileOperations()
    for entry in entries:
        if isinstance(entry, BranchSummaryEntry) and entry.from_hook is not True:
            file_ops = file_ops.with_details(entry.details)
    picked: list[AgentMessage] = []
    total = 0
    for entry in reversed(entries):
        message = _branch_message(entry)
        if message is None:
            continue
        file_ops = file_ops.with_messages((message,))
        tokens = estimate_tokens(message)
        if budget > 0 and total + tokens > budget:
            is_summary = isinstance(entry, CompactionEntry | BranchSummaryEntry)
            if is_summary and total < budget * SUMMARY_OVERRUN_SHARE:
                picked.append(message)
                total += tokens
            break
        picked.append(message)
        total += tokens
    picked.reverse()
    return BranchPreparation(messages=tuple(picked), file_ops=file_ops, total_tokens=total)


def branch_instructions(
    custom_instructions: str | None = None, replace_instructions: bool = False
) -> str:
    """The instructions: the default, the default plus a focus, or the user's own text."""
    if custom_instructions and replace_instructions:
        return custom_instructions
    if custom_instructions:
        return prompts.BRANCH_INSTRUCTIONS + ADDITIONAL_FOCUS + custom_instructions
    return prompts.BRANCH_INSTRUCTIONS


def build_branch_summary_request(
    preparation: BranchPreparation,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
) -> SummaryRequest | None:
    """The summary request for a branch, or ``None`` when there is nothing to summarize.

    Same system prompt and conversation wrapping as compaction; like compaction's, the call
    leaves the output limit to the provider's default for the model and reasons at the
    session's thinking level (pi 1.6.0; 0.73.1 capped it at 2048 tokens without reasoning).
    """
    if not preparation.messages:
        return None
    prompt = conversation_block(preparation.messages) + branch_instructions(
        custom_instructions, replace_instructions
    )
    return SummaryRequest(
        kind="branch",
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=prompt,
    )


@attrs.frozen(kw_only=True)
class BranchSummaryResult:
    """The summary text to store and its file lists (the entry's ``details``)."""

    summary: str
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]

    def details(self) -> dict[str, list[str]]:
        """The ``details`` object of the ``branch_summary`` entry."""
        return {"readFiles": list(self.read_files), "modifiedFiles": list(self.modified_files)}


def branch_response_text(message: AssistantMessage) -> str:
    """The summary a model response gave; a failed response raises its error text."""
    if message.stop_reason == "error":
        raise SummarizationError(message.error_message or SUMMARIZATION_FAILED)
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def finish_branch_summary(preparation: BranchPreparation, text: str | None) -> BranchSummaryResult:
    """The stored summary: the preamble, the model's text (or "No content to summarize" when
    no request was made), then the file lists."""
    read_files, modified_files = preparation.file_ops.file_lists()
    if text is None:
        return BranchSummaryResult(
            summary=NO_CONTENT_TO_SUMMARIZE, read_files=read_files, modified_files=modified_files
        )
    summary = BRANCH_SUMMARY_PREAMBLE + text + format_file_lists(read_files, modified_files)
    return BranchSummaryResult(
        summary=summary, read_files=read_files, modified_files=modified_files
    )


@attrs.frozen(kw_only=True)
class NavigationTarget:
    """Where the leaf goes when navigating to an entry, and the text put back in the editor."""

    new_leaf_id: str | None
    editor_text: str | None = None


def navigation_target(target: SessionEntry) -> NavigationTarget:
    """Navigating to a user message (or custom message) re-opens it: the leaf moves to its
    parent and its text returns to the editor. Any other entry becomes the leaf itself."""
    if isinstance(target, MessageEntry) and isinstance(target.message, UserMessage):
        text = text_of(target.message.content)
        return NavigationTarget(new_leaf_id=target.parent_id, editor_text=text)
    if isinstance(target, CustomMessageEntry):
        return NavigationTarget(new_leaf_id=target.parent_id, editor_text=text_of(target.content))
    return NavigationTarget(new_leaf_id=target.id)
