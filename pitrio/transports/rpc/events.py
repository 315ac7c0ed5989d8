"""Session events as RPC output lines (pi-rpc.md §6), in pi's full form or pitrio's delta form.

Every ``AgentSessionEvent`` is written with the codec, so its keys and values are what pi
writes. Two things are pitrio's own:

* **Entries.** pi 1.6.0 announces only some appended entries; the session's own
  (:class:`EntryRecorded`) are written only under ``set_event_format {"entries": "all"}``
  (:func:`announced`). ``message_start.queueId`` is pitrio's own field; a pi client ignores it.
* **Update formats.** ``full`` (the default) is pi 1.6.0's ``message_update``: the stream
  event without its ``partial``, after the message's ``usage`` so far; ``toolcall_start``
  adds the call's ``id`` and ``toolName`` (pi's ``toJsonEvent``)::

      {"type":"message_update","usage":{...},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hel"}}
      {"type":"message_update","usage":{...},"assistantMessageEvent":{"type":"toolcall_start","contentIndex":1,"id":"call_1","toolName":"read"}}

  ``delta`` (``set_event_format {"updates":"delta"}``, pitrio's own, older than pi's) writes
  the same without ``usage``, and ``name`` for the call's name::

      {"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0}}
      {"type":"message_update","assistantMessageEvent":{"type":"toolcall_start","contentIndex":1,"id":"call_1","name":"read"}}

  In both a client rebuilds the message from ``message_start`` plus the deltas and gets the
  final one at ``message_end``; every other event is the same in both.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from pitrio.messages.agent import AssistantMessage, Usage
from pitrio.messages.codec import encode_reusing, to_json
from pitrio.messages.content import ToolCall
from pitrio.messages.delta_run import DeltaRun
from pitrio.messages.events import (
    AgentSessionEvent,
    EntryRecorded,
    MessageUpdate,
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

EntryFormat = Literal["pi", "all"]
ENTRY_FORMATS: tuple[EntryFormat, ...] = ("pi", "all")
"""Which appended entries are announced: ``pi`` (the default) where pi 1.6.0 announces them,
``all`` every entry the session appends (pitrio's own, as the daemon sends them)."""


def announced(event: AgentSessionEvent, entries: EntryFormat) -> bool:
    """Whether an event is written under the ``entries`` format: an :class:`EntryRecorded`
    (an entry pi 1.6.0 does not announce, its content already seen in other events) only
    with ``all``."""
    return entries == "all" or not isinstance(event, EntryRecorded)


def _update_head(update: PartialUpdate, *, call_name_key: str) -> dict[str, Any]:
    """``assistantMessageEvent`` without ``partial``, keys in pi's order; a ``toolcall_start``
    adds the call's ``id`` and its name under ``call_name_key``."""
    head: dict[str, Any] = {"type": update.type, "contentIndex": update.content_index}
    if isinstance(update, TextDelta | ThinkingDelta | ToolCallDelta):
        head["delta"] = update.delta
    elif isinstance(update, TextEnd | ThinkingEnd):
        head["content"] = update.content
    elif isinstance(update, ToolCallEnd):
        head["toolCall"] = to_json(update.tool_call)
    elif isinstance(update, ToolCallStart):
        content = update.partial.content
        if 0 <= update.content_index < len(content):
            block = content[update.content_index]
            if isinstance(block, ToolCall):
                head["id"] = block.id
                head[call_name_key] = block.name
    return head


def delta_update(event: MessageUpdate) -> dict[str, Any]:
    """The ``delta`` form of a ``message_update`` (see the module docstring)."""
    return {
        "type": "message_update",
        "assistantMessageEvent": _update_head(event.assistant_message_event, call_name_key="name"),
    }


def full_update(event: MessageUpdate) -> dict[str, Any]:
    """pi 1.6.0's ``message_update`` (the ``full`` form): the partial message's ``usage`` as it
    was at this event, and the stream event without its ``partial``."""
    update = event.assistant_message_event
    message = event.message
    usage = message.usage if isinstance(message, AssistantMessage) else update.partial.usage
    return {
        "type": "message_update",
        "usage": to_json(usage),
        "assistantMessageEvent": _update_head(update, call_name_key="toolName"),
    }


_last_usage: tuple[Usage, bytes] | None = None
"""The last usage met by :func:`_full_head` and the line's start it makes (see there)."""


def _full_head(usage: Usage) -> bytes:
    """``{"type":"message_update","usage":{...},"assistantMessageEvent":`` for ``usage``.

    Every update of a reply carries the same usage object until the provider reports a new
    one, so the encoded start of the line is kept for the last usage seen (held, so its id
    cannot be reused) rather than encoded per delta (issue 38). The bytes are what orjson
    writes for :func:`full_update`'s dict: compact, keys in that order."""
    global _last_usage
    last = _last_usage
    if last is not None and last[0] is usage:
        return last[1]
    head = b'{"type":"message_update","usage":' + orjson.dumps(to_json(usage))
    head += b',"assistantMessageEvent":'
    _last_usage = (usage, head)
    return head


_DELTA_HEADS = {
    (kind, form): b'{"type":"%s","contentIndex":' % kind.encode()
    if form == "full"
    else b'{"type":"message_update","assistantMessageEvent":{"type":"%s","contentIndex":'
    % kind.encode()
    for kind in ("text_delta", "thinking_delta")
    for form in UPDATE_FORMATS
}


def encode_run(run: DeltaRun, updates: UpdateFormat = "full") -> bytes:
    """The lines of every delta of ``run``, in order: what :func:`encode_event` writes for
    each of its updates, byte for byte, without making them (issue 38). Every partial of a
    run shares its header, so the ``usage`` of the ``full`` form is the same on each line."""
    middle = _DELTA_HEADS[run.kind, updates] + b"%d" % run.content_index + b',"delta":'
    if updates == "full":
        middle = _full_head(run.header.usage) + middle
    dumps = orjson.dumps
    try:
        return b"".join([middle + dumps(delta) + b"}}\n" for delta in run.deltas])
    except TypeError:
        # A lone surrogate in a delta: each line as encode_event writes it (its slow path).
        return b"".join([encode_event(update, updates) for update in run.updates()])


def encode_event(event: AgentSessionEvent, updates: UpdateFormat = "full") -> bytes:
    """One output line for ``event`` (compact JSON, LF-terminated)."""
    try:
        if isinstance(event, MessageUpdate):
            if updates == "delta":
                return orjson.dumps(delta_update(event)) + b"\n"
            update = event.assistant_message_event
            message = event.message
            usage = message.usage if isinstance(message, AssistantMessage) else update.partial.usage
            body = orjson.dumps(_update_head(update, call_name_key="toolName"))
            return _full_head(usage) + body + b"}\n"  # full_update's dict, encoded in parts
        # A message here is usually one just encoded for another line (see encode_reusing).
        return encode_reusing(event) + b"\n"
    except TypeError:
        # A lone surrogate (orjson refuses them): the slow path escapes it as JavaScript does.
        if isinstance(event, MessageUpdate):
            return dump_line(delta_update(event) if updates == "delta" else full_update(event))
        return dump_line(to_json(event))
