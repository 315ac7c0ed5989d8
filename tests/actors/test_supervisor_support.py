"""Builders and fixture loading shared by the supervisor policy tests (no tests here)."""

from __future__ import annotations

import json
from typing import Any

from pitrio.actors.model_router.providers.faux_rules import FixtureRules
from pitrio.actors.supervisor.compaction import SummaryRequest
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    StopReason,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.codec import from_json
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
)
from tests.shared_dir import SESSIONS, TRANSCRIPTS


def fixture_entries(name: str) -> list[SessionEntry]:
    """The entries of ``sessions/<name>.jsonl`` (header dropped); fails if fixtures are missing."""
    path = SESSIONS / f"{name}.jsonl"
    assert path.is_file(), f"missing fixture {path}"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [from_json(line, SessionEntry) for line in lines[1:]]


def transcript_events(name: str) -> list[dict[str, Any]]:
    """The stdout lines of ``transcripts/<name>.out.jsonl`` as JSON objects."""
    path = TRANSCRIPTS / f"{name}.out.jsonl"
    assert path.is_file(), f"missing fixture {path}"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scripted_reply(request: SummaryRequest) -> str:
    """What the fixtures' recording model answered to ``request``."""
    reply = FixtureRules()(request.context(0))
    assert reply.text is not None
    return reply.text


def user(text: str, ts: int = 1000, images: int = 0) -> UserMessage:
    """A user message with one text block (and ``images`` image blocks)."""
    blocks: tuple[TextContent | ImageContent, ...] = (TextContent(text=text),)
    blocks += tuple(ImageContent(data="AAAA", mime_type="image/png") for _ in range(images))
    return UserMessage(content=blocks, timestamp=ts)


def usage(
    input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0, total: int = 0
) -> Usage:
    """A usage record; ``total`` is ``total_tokens`` as given (0 means "not reported")."""
    return Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=total,
    )


def assistant(
    text: str | None = "ok",
    *,
    ts: int = 2000,
    stop: StopReason = "stop",
    error: str | None = None,
    use: Usage | None = None,
    calls: tuple[ToolCall, ...] = (),
    thinking: str | None = None,
    provider: str = "faux",
    model: str = "faux-1",
) -> AssistantMessage:
    """An assistant response."""
    blocks: list[TextContent | ThinkingContent | ToolCall] = []
    if thinking is not None:
        blocks.append(ThinkingContent(thinking=thinking))
    if text is not None:
        blocks.append(TextContent(text=text))
    blocks.extend(calls)
    return AssistantMessage(
        content=tuple(blocks),
        api="faux-api",
        provider=provider,
        model=model,
        usage=use if use is not None else Usage(),
        stop_reason=stop,
        error_message=error,
        timestamp=ts,
    )


def failed(error: str, ts: int = 3000, **kwargs: Any) -> AssistantMessage:
    """An error response with no content."""
    return assistant(None, stop="error", error=error, ts=ts, **kwargs)


def call(name: str, call_id: str = "c1", **arguments: Any) -> ToolCall:
    """A tool call block."""
    return ToolCall(id=call_id, name=name, arguments=arguments)


def tool_result(text: str, call_id: str = "c1", name: str = "read", ts: int = 2500) -> AgentMessage:
    """A tool result with one text block."""
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=name,
        content=(TextContent(text=text),),
        is_error=False,
        timestamp=ts,
    )


def bash(command: str, output: str, *, excluded: bool = False, ts: int = 2600) -> AgentMessage:
    """A user ``!command`` execution."""
    return BashExecutionMessage(
        command=command,
        output=output,
        exit_code=0,
        cancelled=False,
        truncated=False,
        timestamp=ts,
        exclude_from_context=True if excluded else None,
    )


TS = "2026-01-01T00:00:00.000Z"


class Chain:
    """Builds a linear branch of entries with ids ``e0``, ``e1``, ... (each a child of the last)."""

    def __init__(self) -> None:
        self.entries: list[SessionEntry] = []

    def _next(self) -> tuple[str, str | None]:
        parent = self.entries[-1].id if self.entries else None
        return f"e{len(self.entries)}", parent

    def add(self, entry: SessionEntry) -> SessionEntry:
        """Append a prebuilt entry."""
        self.entries.append(entry)
        return entry

    def msg(self, message: AgentMessage, ts: str = TS) -> Chain:
        """Append a ``message`` entry."""
        id_, parent = self._next()
        self.add(MessageEntry(id=id_, parent_id=parent, timestamp=ts, message=message))
        return self

    def model_change(self) -> Chain:
        """Append a ``model_change`` entry."""
        id_, parent = self._next()
        self.add(
            ModelChangeEntry(
                id=id_, parent_id=parent, timestamp=TS, provider="faux", model_id="faux-1"
            )
        )
        return self

    def custom(self) -> Chain:
        """Append a ``custom`` (extension state) entry."""
        id_, parent = self._next()
        self.add(CustomEntry(custom_type="x", data=None, id=id_, parent_id=parent, timestamp=TS))
        return self

    def label(self, target: str) -> Chain:
        """Append a ``label`` entry."""
        id_, parent = self._next()
        self.add(LabelEntry(id=id_, parent_id=parent, timestamp=TS, target_id=target, label="l"))
        return self

    def custom_message(self, text: str) -> Chain:
        """Append a ``custom_message`` entry."""
        id_, parent = self._next()
        self.add(
            CustomMessageEntry(
                custom_type="info",
                content=text,
                display=True,
                id=id_,
                parent_id=parent,
                timestamp=TS,
            )
        )
        return self

    def branch_summary(
        self, summary: str, details: Any = None, from_hook: bool | None = None
    ) -> Chain:
        """Append a ``branch_summary`` entry."""
        id_, parent = self._next()
        self.add(
            BranchSummaryEntry(
                id=id_,
                parent_id=parent,
                timestamp=TS,
                from_id=parent or "root",
                summary=summary,
                details=details,
                from_hook=from_hook,
            )
        )
        return self

    def compaction(
        self,
        first_kept: str,
        summary: str = "S",
        *,
        details: Any = None,
        from_hook: bool | None = None,
        ts: str = TS,
        tokens_before: int = 100,
    ) -> Chain:
        """Append a ``compaction`` entry."""
        id_, parent = self._next()
        self.add(
            CompactionEntry(
                id=id_,
                parent_id=parent,
                timestamp=ts,
                summary=summary,
                first_kept_entry_id=first_kept,
                tokens_before=tokens_before,
                details=details,
                from_hook=from_hook,
            )
        )
        return self

    def edit(self, target: str, replacement: str | None) -> Chain:
        """Append a ``context_edit`` (``None`` omits the target)."""
        id_, parent = self._next()
        content = None if replacement is None else ContentReplacement(content=replacement)
        self.add(
            ContextEditEntry(
                id=id_, parent_id=parent, timestamp=TS, target_id=target, replacement=content
            )
        )
        return self
