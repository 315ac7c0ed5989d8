"""Boundary drafts written to the session file (spec §7.3): the I/O half of a boundary.

The extension host calls :func:`commit_drafts` after a ``turn_end`` or ``agent_before_settle``
boundary; the drafts are parsed together (none is written if one is malformed), appended in
order, each announced with ``entry_appended``, and the loop's transcript is re-projected when
one of them changes the context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pitrio.actors.session.extensions.drafts import (
    CompactionDraft,
    ContextEditDraft,
    CustomDraft,
    CustomMessageDraft,
    DraftError,
    changes_context,
    parse_drafts,
)
from pitrio.actors.session.extensions.runner import ExtensionRunner
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.entries import ContentReplacement
from pitrio.messages.events import AgentSessionEvent, EntryAppended

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle


async def commit_drafts(
    event: str,
    raw: Sequence[Any],
    *,
    runner: ExtensionRunner,
    store: SessionStoreHandle,
    loop: AgentLoopHandle,
    emit: Callable[[AgentSessionEvent], None],
) -> bool | None:
    """Write a boundary's drafts together; whether the context changed (the loop's transcript
    is then re-projected), ``None`` when they were malformed (reported, nothing written)."""
    if not raw:
        return False
    try:
        drafts = parse_drafts(raw)
    except DraftError as exc:
        runner.report("<runtime>", event, f"boundary drafts dropped: {exc}")
        return None
    for draft in drafts:
        entry: Any
        match draft:
            case CustomDraft(custom_type=custom_type, data=data):
                entry = await store.append_custom_entry(custom_type, data)
            case CustomMessageDraft():
                entry = await store.append_custom_message_entry(
                    draft.custom_type, draft.content, draft.display, draft.details
                )
            case ContextEditDraft(target_id=target, replacement=replacement, reason=reason):
                entry = await store.append_context_edit(
                    target,
                    None if replacement is None else ContentReplacement(content=replacement),
                    reason,
                )
            case CompactionDraft():
                entry = await store.append_compaction(
                    draft.summary,
                    draft.first_kept_entry_id,
                    draft.tokens_before,
                    draft.details,
                )
        emit(EntryAppended(entry=entry))
    if not changes_context(drafts):
        return False
    await loop.set_messages(await store.context_messages())
    return True


def can_continue(context: Sequence[AgentMessage]) -> bool:
    """Whether a run can continue from ``context`` (it must not end with the model's reply)."""
    return bool(context) and not isinstance(context[-1], AssistantMessage)
