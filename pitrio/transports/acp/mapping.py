"""A session's RPC event lines (as dicts) as ACP session updates, and its history replayed.

Pure (no trio, no I/O): :class:`Translator` keeps what a live conversation needs (the calls
already announced, the last reply's stop reason, whether a cancel was asked) and turns each
event into the updates to send; :func:`history_updates` turns a session's messages, as
``get_messages`` returns them, into the updates ``session/load`` replays.

The mapping: text deltas are ``agent_message_chunk``, thinking deltas ``agent_thought_chunk``;
a tool call is announced (``tool_call``, ``pending``) when the model has finished writing it,
``in_progress`` when it starts, its output as ``content`` while it runs, and ``completed`` or
``failed`` at its end; ``edit`` and ``write`` calls carry diffs. A user message is not echoed
live (the client sent it) but is replayed as ``user_message_chunk``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from pitrio.transports.acp.messages import (
    Block,
    BlockContent,
    Chunk,
    Command,
    CommandsUpdate,
    Diff,
    ImageBlock,
    Location,
    StopReason,
    TextBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolContent,
    ToolKind,
    Update,
)

TOOL_KINDS: dict[str, ToolKind] = {
    "read": "read",
    "write": "edit",
    "edit": "edit",
    "bash": "execute",
    "grep": "search",
    "find": "search",
    "ls": "search",
}
"""ACP's kind of each built-in tool (any other tool is ``other``)."""


def _args(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _absolute(cwd: str, path: Any) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def tool_title(name: str, args: Mapping[str, Any]) -> str:
    """A one-line title: the tool and its main argument."""
    for key in ("command", "path", "pattern"):
        value = args.get(key)
        if isinstance(value, str) and value:
            first = value.splitlines()[0] if value.strip() else value
            return f"{name} {first[:200]}"
    return name


def tool_locations(cwd: str, args: Mapping[str, Any]) -> tuple[Location, ...]:
    """The file a call touches, made absolute (ACP's paths are)."""
    path = _absolute(cwd, args.get("path"))
    if path is None:
        return ()
    offset = args.get("offset")
    line = (
        offset if isinstance(offset, int) and not isinstance(offset, bool) and offset > 0 else None
    )
    return (Location(path, line),)


def tool_diffs(cwd: str, name: str, args: Mapping[str, Any]) -> tuple[ToolContent, ...]:
    """The diffs an ``edit`` or ``write`` call makes (from its arguments: the replaced text and
    its replacement for each edit; a written file is new text with no old text known)."""
    path = _absolute(cwd, args.get("path"))
    if path is None:
        return ()
    if name == "write" and isinstance(args.get("content"), str):
        return (Diff(path, args["content"]),)
    if name != "edit":
        return ()
    edits = args.get("edits")
    pairs = edits if isinstance(edits, list) else [args]
    diffs: list[ToolContent] = []
    for edit in pairs:
        old, new = _args(edit).get("oldText"), _args(edit).get("newText")
        if isinstance(old, str) and isinstance(new, str):
            diffs.append(Diff(path, new, old))
    return tuple(diffs)


def blocks_of(content: Any) -> tuple[Block, ...]:
    """Text and image blocks of a message's or a tool result's content."""
    if isinstance(content, str):
        return (TextBlock(content),) if content else ()
    blocks: list[Block] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            blocks.append(TextBlock(block["text"]))
        elif block.get("type") == "image" and isinstance(block.get("data"), str):
            blocks.append(ImageBlock(block["data"], str(block.get("mimeType") or "image/png")))
    return tuple(blocks)


def result_content(result: Any) -> tuple[ToolContent, ...]:
    """A tool result's output as ``content`` entries."""
    return tuple(BlockContent(block) for block in blocks_of(_args(result).get("content")))


def announce(cwd: str, call_id: str, name: str, args: Any) -> ToolCallStart:
    """The ``tool_call`` of a call."""
    arguments = _args(args)
    return ToolCallStart(
        tool_call_id=call_id,
        title=tool_title(name, arguments),
        kind=TOOL_KINDS.get(name, "other"),
        status="pending",
        locations=tool_locations(cwd, arguments),
        content=tool_diffs(cwd, name, arguments),
        raw_input=arguments,
    )


def finish(
    call_id: str, result: Any, failed: bool, diffs: tuple[ToolContent, ...]
) -> ToolCallProgress:
    """The last ``tool_call_update`` of a call: its status and output (a successful edit keeps
    its diffs first)."""
    content = result_content(result)
    return ToolCallProgress(
        call_id,
        status="failed" if failed else "completed",
        content=(content if failed else (*diffs, *content)),
    )


STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "toolUse": "end_turn",
    "length": "max_tokens",
}
"""pi's stop reason of a run's last reply as ACP's (``aborted`` is ``cancelled``; no pitrio
provider reports a refusal, so ``refusal`` is never sent)."""


@attrs.define
class Translator:
    """A live session's events as updates (one per ACP session)."""

    cwd: str
    announced: dict[str, tuple[ToolContent, ...]] = attrs.Factory(dict)
    """The calls announced so far in this run, with their diffs."""
    stop_reason: str | None = None
    """The ``stopReason`` of the run's last assistant message."""
    error: str | None = None
    """Its ``errorMessage`` when that was ``error``."""
    running: bool = False

    def updates(self, event: Mapping[str, Any]) -> list[Update]:
        """The updates one event line makes (often none)."""
        kind = event.get("type")
        if kind == "agent_start":
            self.running, self.stop_reason, self.error = True, None, None
            self.announced.clear()
        elif kind == "message_update":
            return self._stream(_args(event.get("assistantMessageEvent")))
        elif kind == "message_end":
            message = _args(event.get("message"))
            if message.get("role") == "assistant":
                self.stop_reason = str(message.get("stopReason") or "")
                self.error = message.get("errorMessage") if self.stop_reason == "error" else None
        elif kind == "tool_execution_start":
            call_id = str(event.get("toolCallId"))
            if call_id not in self.announced:
                start = announce(self.cwd, call_id, str(event.get("toolName")), event.get("args"))
                self.announced[call_id] = start.content
                return [attrs.evolve(start, status="in_progress")]
            return [ToolCallProgress(call_id, status="in_progress")]
        elif kind == "tool_execution_update":
            content = result_content(event.get("partialResult"))
            if content:
                call_id = str(event.get("toolCallId"))
                diffs = self.announced.get(call_id, ())
                return [ToolCallProgress(call_id, content=(*diffs, *content))]
        elif kind == "tool_execution_end":
            call_id = str(event.get("toolCallId"))
            diffs = self.announced.get(call_id, ())
            return [finish(call_id, event.get("result"), bool(event.get("isError")), diffs)]
        elif kind == "agent_settled":
            self.running = False
        return []

    def _stream(self, update: Mapping[str, Any]) -> list[Update]:
        kind, delta = update.get("type"), update.get("delta")
        if kind == "text_delta" and isinstance(delta, str) and delta:
            return [Chunk("agent_message_chunk", TextBlock(delta))]
        if kind == "thinking_delta" and isinstance(delta, str) and delta:
            return [Chunk("agent_thought_chunk", TextBlock(delta))]
        if kind == "toolcall_end":
            call = _args(update.get("toolCall"))
            call_id = str(call.get("id"))
            start = announce(self.cwd, call_id, str(call.get("name")), call.get("arguments"))
            self.announced[call_id] = start.content
            return [start]
        return []

    def settled_reason(self, *, aborted: bool) -> StopReason:
        """The run's ``stopReason`` (at ``agent_settled``)."""
        if aborted or self.stop_reason == "aborted":
            return "cancelled"
        return STOP_REASONS.get(self.stop_reason or "stop", "end_turn")


def history_updates(cwd: str, messages: Sequence[Mapping[str, Any]]) -> Iterable[Update]:
    """Every message and tool call of a session, in order, as ``session/load`` replays them."""
    diffs: dict[str, tuple[ToolContent, ...]] = {}
    for message in messages:
        role = message.get("role")
        if role == "user":
            for block in blocks_of(message.get("content")):
                yield Chunk("user_message_chunk", block)
        elif role == "assistant":
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "thinking" and block.get("thinking"):
                    yield Chunk("agent_thought_chunk", TextBlock(str(block["thinking"])))
                elif kind == "text" and block.get("text"):
                    yield Chunk("agent_message_chunk", TextBlock(str(block["text"])))
                elif kind == "toolCall":
                    call_id = str(block.get("id"))
                    start = announce(cwd, call_id, str(block.get("name")), block.get("arguments"))
                    diffs[call_id] = start.content
                    yield start
        elif role == "toolResult":
            call_id = str(message.get("toolCallId"))
            yield finish(call_id, message, bool(message.get("isError")), diffs.get(call_id, ()))


def commands_update(commands: Sequence[Mapping[str, Any]]) -> CommandsUpdate:
    """``available_commands_update`` from ``get_commands``' list (extension commands, prompt
    templates, skills), in its order."""
    entries = []
    for command in commands:
        name = command.get("name")
        if isinstance(name, str) and name:
            description = command.get("description")
            entries.append(Command(name, description if isinstance(description, str) else ""))
    return CommandsUpdate(tuple(entries))
