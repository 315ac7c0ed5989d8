"""Session events as RPC output lines (pi-rpc.md §6), in pi's full form or pitrio's delta form.

Every ``AgentSessionEvent`` is written with the codec, so its keys and values are what pi
writes. Two things are pitrio's own:

* **Seed events** (``agent_settled``, ``entry_appended``, the ``summarization_retry_*``
  events, ``bash_execution_update``) and seed fields (``agent_end.willRetry``,
  ``message_start.queueId``) are written too: they are the newer pi's additions that pitrio
  targets, and a pi client ignores types and fields it does not know.
* **Update formats.** ``full`` (the default, pi's) writes every ``message_update`` with the
  whole ``partial`` message inside ``assistantMessageEvent`` and again as ``message``, so a
  reply of *n* deltas costs O(n²) bytes. ``delta`` (``set_event_format {"updates":"delta"}``)
  writes only what changed, O(n) in total::

      {"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0}}
      {"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hel"}}
      {"type":"message_update","assistantMessageEvent":{"type":"text_end","contentIndex":0,"content":"Hello"}}
      {"type":"message_update","assistantMessageEvent":{"type":"toolcall_start","contentIndex":1,"id":"call_1","name":"read"}}
      {"type":"message_update","assistantMessageEvent":{"type":"toolcall_delta","contentIndex":1,"delta":"{\\"path\\""}}
      {"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":1,"toolCall":{...}}}

  i.e. the event without ``partial`` and without the top-level ``message``; ``toolcall_start``
  adds the call's ``id`` and ``name`` (otherwise only known at ``toolcall_end``).
  ``message_start`` / ``message_end`` and every other event are unchanged, so a client
  rebuilds the message from ``message_start`` plus the deltas and gets the final one at
  ``message_end``.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from pitrio.messages.codec import encode_reusing, to_json
from pitrio.messages.content import ToolCall
from pitrio.messages.events import (
    AgentSessionEvent,
    AgentSettled,
    BashExecutionUpdate,
    EntryAppended,
    MessageUpdate,
    SessionReadOnly,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)
from pitrio.messages.stream import (
    PartialUpdate,
    TextDelta,
    TextEnd,
    ThinkingDelta,
    ThinkingEnd,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from pitrio.transports.rpc.protocol import dump_line

UpdateFormat = Literal["full", "delta"]
UPDATE_FORMATS: tuple[UpdateFormat, ...] = ("full", "delta")

SEED_EVENTS = (
    AgentSettled,
    EntryAppended,
    SummarizationRetryScheduled,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    BashExecutionUpdate,
    SessionReadOnly,
)
"""Event classes pi 0.73.1 does not emit (the seed's additions pitrio writes as well)."""


def is_seed_event(event: AgentSessionEvent) -> bool:
    """Whether pi 0.73.1 would not have written this event at all."""
    return isinstance(event, SEED_EVENTS)


def _update_head(update: PartialUpdate, *, with_call: bool) -> dict[str, Any]:
    """``assistantMessageEvent`` without ``partial``, keys in pi's order."""
    head: dict[str, Any] = {"type": update.type, "contentIndex": update.content_index}
    if isinstance(update, TextDelta | ThinkingDelta | ToolCallDelta):
        head["delta"] = update.delta
    elif isinstance(update, TextEnd | ThinkingEnd):
        head["content"] = update.content
    elif isinstance(update, ToolCallEnd):
        head["toolCall"] = to_json(update.tool_call)
    elif with_call and isinstance(update, ToolCallStart):
        content = update.partial.content
        if 0 <= update.content_index < len(content):
            block = content[update.content_index]
            if isinstance(block, ToolCall):
                head["id"] = block.id
                head["name"] = block.name
    return head


def delta_update(event: MessageUpdate) -> dict[str, Any]:
    """The ``delta`` form of a ``message_update`` (see the module docstring)."""
    return {
        "type": "message_update",
        "assistantMessageEvent": _update_head(event.assistant_message_event, with_call=True),
    }


def _full_update_line(event: MessageUpdate) -> bytes:
    """pi's ``message_update`` line, the partial message serialised once.

    pi writes the same message twice (as ``partial`` and as ``message``); the agent loop hands
    over one object for both, so its JSON is produced once and spliced in twice.
    """
    update = event.assistant_message_event
    head = orjson.dumps(_update_head(update, with_call=False))
    partial = orjson.dumps(to_json(update.partial))
    message = partial if event.message is update.partial else orjson.dumps(to_json(event.message))
    return b"".join(
        (
            b'{"type":"message_update","assistantMessageEvent":',
            head[:-1],
            b',"partial":',
            partial,
            b'},"message":',
            message,
            b"}\n",
        )
    )


def encode_event(event: AgentSessionEvent, updates: UpdateFormat = "full") -> bytes:
    """One output line for ``event`` (compact JSON, LF-terminated)."""
    try:
        if isinstance(event, MessageUpdate):
            if updates == "delta":
                return orjson.dumps(delta_update(event)) + b"\n"
            return _full_update_line(event)
        # A message here is usually one just encoded for another line (see encode_reusing).
        return encode_reusing(event) + b"\n"
    except TypeError:
        # A lone surrogate (orjson refuses them): the slow path escapes it as JavaScript does.
        if isinstance(event, MessageUpdate) and updates == "delta":
            return dump_line(delta_update(event))
        return dump_line(to_json(event))
