"""Boundary drafts (spec §3.15.3): entries a ``turn_end`` or ``agent_before_settle`` handler
asks the session to write, checked before anything is written.

A draft is a dict (pi's camelCase or snake_case keys) whose ``type`` is one of ``custom``,
``custom_message``, ``context_edit`` or ``compaction``. :func:`parse_drafts` turns a handler's
list into typed drafts, or says what is wrong with the first bad one: then none is written.
Pure code, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.entries import (
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
)


@attrs.frozen(kw_only=True)
class CustomDraft:
    """A ``custom`` entry: extension state, not sent to the model."""

    custom_type: str
    data: Any = None


@attrs.frozen(kw_only=True)
class CustomMessageDraft:
    """A ``custom_message`` entry: reaches the model as a user message."""

    custom_type: str
    content: str | tuple[TextContent | ImageContent, ...]
    display: bool = True
    details: Any = None


@attrs.frozen(kw_only=True)
class ContextEditDraft:
    """Omit (``replacement`` ``None``) or rewrite an entry's content in the projection."""

    target_id: str
    replacement: str | tuple[TextContent | ImageContent, ...] | None
    reason: str | None = None


@attrs.frozen(kw_only=True)
class CompactionDraft:
    """A ``compaction`` entry with a summary the handler wrote."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None


Draft = CustomDraft | CustomMessageDraft | ContextEditDraft | CompactionDraft


class DraftError(ValueError):
    """A draft is malformed; the message names its index and what is wrong."""


def _field(raw: dict[str, Any], snake: str, camel: str) -> Any:
    return raw[camel] if camel in raw else raw.get(snake)


def _content(value: Any, where: str) -> str | tuple[TextContent | ImageContent, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(
        isinstance(part, TextContent | ImageContent) for part in value
    ):
        return tuple(value)
    raise DraftError(f"{where}: content must be a string or a list of text/image blocks")


def _one(index: int, raw: Any) -> Draft:
    where = f"draft {index}"
    if isinstance(raw, CustomDraft | CustomMessageDraft | ContextEditDraft | CompactionDraft):
        return raw
    if not isinstance(raw, dict):
        raise DraftError(f"{where}: expected an object, got {type(raw).__name__}")
    kind = raw.get("type")
    if kind == "custom":
        custom_type = _field(raw, "custom_type", "customType")
        if not isinstance(custom_type, str) or not custom_type:
            raise DraftError(f"{where}: custom needs a customType")
        return CustomDraft(custom_type=custom_type, data=raw.get("data"))
    if kind == "custom_message":
        custom_type = _field(raw, "custom_type", "customType")
        if not isinstance(custom_type, str) or not custom_type:
            raise DraftError(f"{where}: custom_message needs a customType")
        display = raw.get("display", True)
        if not isinstance(display, bool):
            raise DraftError(f"{where}: display must be a boolean")
        return CustomMessageDraft(
            custom_type=custom_type,
            content=_content(raw.get("content"), where),
            display=display,
            details=raw.get("details"),
        )
    if kind == "context_edit":
        target = _field(raw, "target_id", "targetId")
        if not isinstance(target, str) or not target:
            raise DraftError(f"{where}: context_edit needs a targetId")
        replacement = raw.get("replacement")
        return ContextEditDraft(
            target_id=target,
            replacement=None if replacement is None else _content(replacement, where),
            reason=raw.get("reason") if isinstance(raw.get("reason"), str) else None,
        )
    if kind == "compaction":
        summary = raw.get("summary")
        first = _field(raw, "first_kept_entry_id", "firstKeptEntryId")
        tokens = _field(raw, "tokens_before", "tokensBefore")
        if not isinstance(summary, str) or not isinstance(first, str):
            raise DraftError(f"{where}: compaction needs summary and firstKeptEntryId")
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise DraftError(f"{where}: compaction needs an integer tokensBefore")
        return CompactionDraft(
            summary=summary,
            first_kept_entry_id=first,
            tokens_before=tokens,
            details=raw.get("details"),
        )
    raise DraftError(
        f"{where}: type must be custom, custom_message, context_edit or compaction, got {kind!r}"
    )


def parse_drafts(raw: Sequence[Any]) -> tuple[Draft, ...]:
    """Every draft typed, in order; :class:`DraftError` on the first malformed one."""
    return tuple(_one(index, item) for index, item in enumerate(raw))


def changes_context(drafts: Sequence[Draft]) -> bool:
    """Whether writing ``drafts`` changes what the model sees next."""
    return any(not isinstance(draft, CustomDraft) for draft in drafts)


def draft_entry(
    draft: Draft, *, id: str, parent_id: str | None, timestamp: str
) -> CustomEntry | CustomMessageEntry | ContextEditEntry | CompactionEntry:
    """The entry ``draft`` would write, with the envelope given (a boundary's preview of the
    context builds these without writing them)."""
    envelope: dict[str, Any] = {"id": id, "parent_id": parent_id, "timestamp": timestamp}
    if isinstance(draft, CustomDraft):
        return CustomEntry(custom_type=draft.custom_type, data=draft.data, **envelope)
    if isinstance(draft, CustomMessageDraft):
        fields = attrs.asdict(draft, recurse=False)
        return CustomMessageEntry(**fields, **envelope)
    if isinstance(draft, ContextEditDraft):
        replacement = _replacement(draft.replacement)
        return ContextEditEntry(
            target_id=draft.target_id, replacement=replacement, reason=draft.reason, **envelope
        )
    return CompactionEntry(**attrs.asdict(draft, recurse=False), **envelope)


def _replacement(
    content: str | tuple[TextContent | ImageContent, ...] | None,
) -> ContentReplacement | None:
    return None if content is None else ContentReplacement(content=content)
