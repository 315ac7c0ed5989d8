"""RPC commands (pi-rpc.md §5): each command type mapped to the session, and pi's ``data``.

:func:`execute` takes a parsed :class:`~pitrio.transports.rpc.protocol.Request` and an
:class:`RpcBackend` (what the process offers: the current session, session replacement, the
model list, ...) and returns the one response to write. No I/O of its own: the server owns the
streams, so this mapping runs in tests against an in-process session.

Response shapes and key orders are pi 1.6.0's (its ``docs/rpc-commands.md`` and
``dist/modes/rpc/rpc-mode.js``; the transcripts in ``../shared/fixtures/pi16`` show them);
error texts are pi's where the session layer raises them (``Model not found: p/id``,
``Session name cannot be empty``, ``Entry not found: <id>``, ...). An unknown command's
response keeps the command's ``id``, as pi 1.6.0's does.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal, Protocol

import trio

from pitrio.errors import PitrioError, unwrap_group
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.content import ImageContent
from pitrio.messages.model import Model
from pitrio.sdk.session import (
    CycleResult,
    SessionHandle,
    SessionReplacementCancelled,
)
from pitrio.sdk.session import (
    ScopedModel as ScopedModel,
)
from pitrio.sdk.tools import nul_problem
from pitrio.transports.rpc.entries import EntryNotFound, entries_data, tree_data
from pitrio.transports.rpc.events import ENTRY_FORMATS, UPDATE_FORMATS, EntryFormat, UpdateFormat
from pitrio.transports.rpc.protocol import (
    MISSING,
    EncodedData,
    Request,
    StreamedPieces,
    array_pieces,
    failure,
    js_string,
    success,
    too_deep,
)
from pitrio.transports.rpc.shapes import (
    bash_data,
    cycle_model_data,
    fork_messages_data,
    last_text_data,
    state_data,
)


class CommandError(PitrioError):
    """A command's fields are unusable (the text becomes the response's ``error``)."""


class RpcBackend(Protocol):
    """What the command handlers need from the process (the server implements it)."""

    async def session(self) -> SessionHandle:
        """The current session (waiting out a replacement in progress)."""
        ...

    def events_before_response(self, request: Request, session: SessionHandle, seq: int) -> None:
        """``session``'s events up to ``seq`` precede ``request``'s response (a barrier the
        command learnt without asking the session again); optional for a backend."""
        ...

    def bash_accepted(self, request: Request) -> Callable[[], None]:
        """What ``bash`` calls once the session holds ``request``'s command."""
        ...

    async def earlier_bash_accepted(self, request: Request) -> None:
        """Return once every ``bash`` read before ``request`` is held by the session, or
        answered (pi handles commands in input order: its abort_bash always sees them)."""
        ...

    async def new_session(self, parent_session: str | None) -> None:
        """Replace the current session with a fresh one."""
        ...

    async def switch_session(self, path: str) -> None:
        """Replace the current session with the one in ``path``."""
        ...

    async def fork(self, entry_id: str) -> str | None:
        """Fork before a user message; returns its text."""
        ...

    async def clone(self) -> None:
        """Replace the current session with a copy of its current branch."""
        ...

    async def available_models(self) -> tuple[Model, ...]:
        """The models a client may choose from (``get_available_models``)."""
        ...

    def scoped_models(self) -> tuple[ScopedModel, ...]:
        """The ``--models`` scope (empty: cycle through every available model)."""
        ...

    async def command_list(self) -> list[dict[str, Any]]:
        """``get_commands`` entries: extension commands, prompt templates, skills."""
        ...

    def set_update_format(self, updates: UpdateFormat) -> None:
        """Switch this client's ``message_update`` format."""
        ...

    def set_entry_format(self, entries: EntryFormat) -> None:
        """Switch which ``entry_appended`` events this client gets (raises
        :class:`CommandError` for a form the transport cannot send)."""
        ...


Handler = Callable[[RpcBackend, Request], Awaitable[Any]]
"""A command handler: returns the response ``data`` (or :data:`MISSING` for none)."""

EVENTFUL_COMMANDS = frozenset(
    {
        "prompt",
        "steer",
        "follow_up",
        "abort",
        "bash",
        "clear_queue",
        "set_model",
        "cycle_model",
        "set_thinking_level",
        "cycle_thinking_level",
        "compact",
        "abort_retry",
        "set_session_name",
    }
)
"""Commands whose events pi writes before their response (``queue_update``, ``agent_end``,
``thinking_level_changed``, ``compaction_end``, ``session_info_changed``, ...): the server
writes every event the session emitted up to the answer before the response."""


# -- field access --------------------------------------------------------------------------


def _text(request: Request, name: str) -> str:
    value = request.get(name)
    if not isinstance(value, str):
        raise CommandError(f"{request.type}: {name} must be a string")
    return value


def _optional_text(request: Request, name: str) -> str | None:
    value = request.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CommandError(f"{request.type}: {name} must be a string")
    return value


def _images(request: Request) -> tuple[ImageContent, ...]:
    value = request.get("images")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CommandError(f"{request.type}: images must be an array")
    images = []
    for index, item in enumerate(value):
        try:
            images.append(from_json(item, ImageContent))
        except PitrioError as exc:
            raise CommandError(f"{request.type}: images[{index}]: {exc}") from None
    return tuple(images)


def _flag(request: Request, name: str) -> bool:
    # pi stores whatever it gets (an absent field saves false); a setting is a boolean here.
    value = request.get(name)
    if not isinstance(value, bool):
        raise CommandError(f"{request.type}: {name} must be a boolean")
    return value


# -- handlers ------------------------------------------------------------------------------


async def _prompt(backend: RpcBackend, request: Request) -> Any:
    message = _text(request, "message")
    images = _images(request)
    behavior = request.get("streamingBehavior")
    session = await backend.session()
    # Answered at acceptance (pi): the run goes on and reports through events.
    _, accepted = await session.submit_with_seq(
        message,
        images=images,
        streaming_behavior=behavior if behavior in ("steer", "followUp") else None,
        source="rpc",
    )
    backend.events_before_response(request, session, accepted.seq)
    return {"disposition": accepted.disposition}


async def _steer(backend: RpcBackend, request: Request) -> Any:
    message, images = _text(request, "message"), _images(request)
    queued = await (await backend.session()).steer(message, images, source="rpc")
    # None: an extension's input handler took the text (pi 1.6.0's "handled")
    return {"disposition": "handled" if queued is None else "queued"}


async def _follow_up(backend: RpcBackend, request: Request) -> Any:
    message, images = _text(request, "message"), _images(request)
    queued = await (await backend.session()).follow_up(message, images, source="rpc")
    return {"disposition": "handled" if queued is None else "queued"}


async def _abort(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).abort()
    return MISSING


async def _clear_queue(backend: RpcBackend, request: Request) -> Any:
    steering, follow_up = await (await backend.session()).clear_queue()
    return {"steering": list(steering), "followUp": list(follow_up)}


async def _get_entries(backend: RpcBackend, request: Request) -> Any:
    since = request.get("since", MISSING)
    lines, leaf_id = await (await backend.session()).entry_lines()
    if since is MISSING:
        return entries_data(lines, leaf_id, None)
    if not isinstance(since, str):  # pi looks it up as it is: no entry has such an id
        shown = "null" if since is None else js_string(since)
        raise EntryNotFound(f"Entry not found: {shown}")
    return entries_data(lines, leaf_id, since)


async def _get_tree(backend: RpcBackend, request: Request) -> Any:
    roots, leaf_id = await (await backend.session()).tree()
    return tree_data(roots, leaf_id)


async def _get_available_thinking_levels(backend: RpcBackend, request: Request) -> Any:
    return {"levels": list(await (await backend.session()).available_thinking_levels())}


async def _new_session(backend: RpcBackend, request: Request) -> Any:
    try:
        await backend.new_session(_optional_text(request, "parentSession"))
    except SessionReplacementCancelled:
        return {"cancelled": True}
    return {"cancelled": False}


async def _get_state(backend: RpcBackend, request: Request) -> Any:
    return state_data(await (await backend.session()).state())


async def _get_messages(backend: RpcBackend, request: Request) -> Any:
    session = await backend.session()
    messages = await session.messages_json()
    if getattr(backend, "streams_replies", False):
        # Encoded as the writer writes it (it checkpoints between pieces): the 17 MB reply of
        # a 20,000-turn session is never held whole (issue 38: peak memory of a resume). Once
        # its head is written the line holds the output until its end, so the replies of
        # queries asked of the session before this one (a get_state sent with it) go first,
        # as they did while the batches were encoded here: one more question to the session
        # (it answers in order), then a round for their handlers to write. Without it a
        # get_state waited behind the whole reply in 3 of 8 starts.
        await session.state()
        await trio.lowlevel.checkpoint()
        return EncodedData(StreamedPieces(_messages_pieces(messages)))
    pieces = [b'{"messages":']
    for piece in array_pieces(messages, encode=None):
        pieces.append(piece)
        # A long transcript takes a while to encode: other commands go on between batches.
        await trio.lowlevel.checkpoint()
    pieces.append(b"}")
    return EncodedData(tuple(pieces))


def _messages_pieces(messages: Sequence[Any]) -> Iterator[bytes]:
    yield b'{"messages":'
    yield from array_pieces(messages, encode=None)
    yield b"}"


async def _set_model(backend: RpcBackend, request: Request) -> Any:
    provider, model_id = _text(request, "provider"), _text(request, "modelId")
    model = await (await backend.session()).set_model(provider, model_id)
    return to_json(model)


async def _cycle_model(backend: RpcBackend, request: Request) -> Any:
    session = await backend.session()
    scoped = backend.scoped_models()
    if not scoped:
        return cycle_model_data(await session.cycle_model())
    if len(scoped) <= 1:
        return None
    current = (await session.state()).agent.model
    index = next(
        (
            i
            for i, s in enumerate(scoped)
            if s.model.provider == current.provider and s.model.id == current.id
        ),
        -1,
    )
    choice = scoped[(index + 1) % len(scoped)]
    model = await session.set_model(choice.model.provider, choice.model.id)
    level = (
        await session.set_thinking_level(choice.thinking_level)
        if choice.thinking_level is not None
        else (await session.state()).agent.thinking_level
    )
    return cycle_model_data(CycleResult(model=model, thinking_level=level, is_scoped=True))


async def _get_available_models(backend: RpcBackend, request: Request) -> Any:
    return {"models": [to_json(model) for model in await backend.available_models()]}


async def _set_thinking_level(backend: RpcBackend, request: Request) -> Any:
    # pi clamps whatever string it gets (an unknown level becomes the model's lowest one);
    # anything but a string is a field error here.
    level = _text(request, "level")
    await (await backend.session()).set_thinking_level(level)
    return MISSING


async def _cycle_thinking_level(backend: RpcBackend, request: Request) -> Any:
    level = await (await backend.session()).cycle_thinking_level()
    return None if level is None else {"level": level}


QUEUE_MODES: tuple[Literal["all", "one-at-a-time"], ...] = ("all", "one-at-a-time")


def _queue_mode(request: Request) -> Literal["all", "one-at-a-time"]:
    # pi stores whatever it gets (and reports it in get_state); refused here, naming it.
    mode = request.get("mode")
    for choice in QUEUE_MODES:
        if mode == choice:
            return choice
    raise CommandError(
        f'{request.type}: unknown mode {_shown(mode)} (use "all" or "one-at-a-time")'
    )


def _shown(value: Any, limit: int = 80) -> str:
    """A field's value for an error text: JSON, cut to ``limit`` characters."""
    if value is None:
        return "undefined"
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit]  # a 100 MB string is not copied to be cut
    text = json.dumps(value, ensure_ascii=False) if not too_deep(value) else "(deeply nested)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def _set_steering_mode(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).set_queue_mode("steering", _queue_mode(request))
    return MISSING


async def _set_follow_up_mode(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).set_queue_mode("followUp", _queue_mode(request))
    return MISSING


async def _compact(backend: RpcBackend, request: Request) -> Any:
    instructions = _optional_text(request, "customInstructions")
    return to_json(await (await backend.session()).compact(instructions))


async def _set_auto_compaction(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).set_auto_compaction(_flag(request, "enabled"))
    return MISSING


async def _set_auto_retry(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).set_auto_retry(_flag(request, "enabled"))
    return MISSING


async def _abort_retry(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).abort_retry()
    return MISSING


async def _bash(backend: RpcBackend, request: Request) -> Any:
    command = _text(request, "command")
    problem = nul_problem(command)
    if problem is not None:  # refused before it meets a running command's "already running"
        raise CommandError(problem)
    exclude = request.get("excludeFromContext")
    if exclude is not None and not isinstance(exclude, bool):
        raise CommandError("bash: excludeFromContext must be a boolean")
    session = await backend.session()
    result = await session.bash(
        command,
        exclude_from_context=exclude,
        accepted=backend.bash_accepted(request),
        # pi 1.6.0 tags the command's output events with its id
        stream_id=request.id if isinstance(request.id, str) else None,
    )
    return bash_data(result)


async def _abort_bash(backend: RpcBackend, request: Request) -> Any:
    await backend.earlier_bash_accepted(request)  # a bash read before it is cancelled too
    await (await backend.session()).abort_bash()
    return MISSING


async def _get_session_stats(backend: RpcBackend, request: Request) -> Any:
    return to_json(await (await backend.session()).session_stats())


async def _get_cache_warming(backend: RpcBackend, request: Request) -> Any:
    return await (await backend.session()).cache_warming()


async def _export_html(backend: RpcBackend, request: Request) -> Any:
    path = await (await backend.session()).export_html(_optional_text(request, "outputPath"))
    return {"path": path}


async def _switch_session(backend: RpcBackend, request: Request) -> Any:
    try:
        await backend.switch_session(_text(request, "sessionPath"))
    except SessionReplacementCancelled:
        return {"cancelled": True}
    return {"cancelled": False}


async def _fork(backend: RpcBackend, request: Request) -> Any:
    try:
        text = await backend.fork(_text(request, "entryId"))
    except SessionReplacementCancelled:
        return {"cancelled": True}  # pi: no selected text when an extension cancelled it
    return {"text": text or "", "cancelled": False}


async def _clone(backend: RpcBackend, request: Request) -> Any:
    try:
        await backend.clone()
    except SessionReplacementCancelled:
        return {"cancelled": True}
    return {"cancelled": False}


async def _get_fork_messages(backend: RpcBackend, request: Request) -> Any:
    return fork_messages_data(await (await backend.session()).fork_messages())


async def _get_last_assistant_text(backend: RpcBackend, request: Request) -> Any:
    return last_text_data(await (await backend.session()).last_assistant_text())


async def _set_session_name(backend: RpcBackend, request: Request) -> Any:
    await (await backend.session()).set_session_name(_text(request, "name"))
    return MISSING


async def _get_commands(backend: RpcBackend, request: Request) -> Any:
    return {"commands": await backend.command_list()}


async def _set_event_format(backend: RpcBackend, request: Request) -> Any:
    # Both keys are checked before either applies: a bad request changes nothing.
    # A key given as null is a wrong value, not an absent key.
    has_updates, has_entries = "updates" in request.fields, "entries" in request.fields
    updates, entries = request.get("updates"), request.get("entries")
    if not has_updates and not has_entries:
        raise CommandError('set_event_format needs "updates" ("full" or "delta") or "entries"')
    chosen_updates = next((c for c in UPDATE_FORMATS if c == updates), None)
    if has_updates and chosen_updates is None:
        raise CommandError(f'Unknown event format: {_shown(updates)} (use "full" or "delta")')
    chosen_entries = next((c for c in ENTRY_FORMATS if c == entries), None)
    if has_entries and chosen_entries is None:
        raise CommandError(f'Unknown entries format: {_shown(entries)} (use "pi" or "all")')
    answer: dict[str, Any] = {}
    if chosen_entries is not None:
        backend.set_entry_format(chosen_entries)
        answer["entries"] = chosen_entries
    if chosen_updates is not None:
        backend.set_update_format(chosen_updates)
        answer["updates"] = chosen_updates
    return answer


HANDLERS: dict[str, Handler] = {
    "prompt": _prompt,
    "steer": _steer,
    "follow_up": _follow_up,
    "abort": _abort,
    "clear_queue": _clear_queue,
    "new_session": _new_session,
    "get_state": _get_state,
    "get_messages": _get_messages,
    "set_model": _set_model,
    "cycle_model": _cycle_model,
    "get_available_models": _get_available_models,
    "set_thinking_level": _set_thinking_level,
    "cycle_thinking_level": _cycle_thinking_level,
    "get_available_thinking_levels": _get_available_thinking_levels,
    "set_steering_mode": _set_steering_mode,
    "set_follow_up_mode": _set_follow_up_mode,
    "compact": _compact,
    "set_auto_compaction": _set_auto_compaction,
    "set_auto_retry": _set_auto_retry,
    "abort_retry": _abort_retry,
    "bash": _bash,
    "abort_bash": _abort_bash,
    "get_session_stats": _get_session_stats,
    "get_cache_warming": _get_cache_warming,
    "export_html": _export_html,
    "switch_session": _switch_session,
    "fork": _fork,
    "clone": _clone,
    "get_fork_messages": _get_fork_messages,
    "get_entries": _get_entries,
    "get_tree": _get_tree,
    "get_last_assistant_text": _get_last_assistant_text,
    "set_session_name": _set_session_name,
    "get_commands": _get_commands,
    "set_event_format": _set_event_format,
}
"""Every command pitrio answers: pi 1.6.0's, plus ``set_event_format``."""


def unknown_command(request: Request) -> dict[str, Any]:
    """The response to a command type nobody handles (keeping its ``id``, as pi 1.6.0)."""
    return failure(request, f"Unknown command: {request.type}")


async def execute(backend: RpcBackend, request: Request) -> dict[str, Any]:
    """Run one command; returns its response (never raises for a failing command)."""
    handler = HANDLERS.get(request.type)
    if handler is None:
        return unknown_command(request)
    try:
        data = await handler(backend, request)
    except Exception as exc:
        leaf = unwrap_group(exc)  # a nursery's group says nothing: the error inside it does
        if isinstance(leaf, PitrioError):
            return failure(request, str(leaf) or type(leaf).__name__)
        # A bug, not a refusal: keep serving, answer the command, leave one line on stderr
        # (the traceback too when PITRIO_DEBUG is set: no user sees one otherwise).
        sys.stderr.write(f"pitrio: internal error in {request.type}: {describe(leaf)}\n")
        if os.environ.get("PITRIO_DEBUG"):
            traceback.print_exception(leaf, file=sys.stderr)
        return failure(request, describe(leaf, bare=True))
    return success(request, data)


def describe(exc: BaseException, *, bare: bool = False) -> str:
    """One line naming an unexpected error: its message (``bare``) or type and message; for
    a nursery's group the error inside it, never the group's own text."""
    leaf = unwrap_group(exc)
    if isinstance(leaf, BaseExceptionGroup):
        parts = "; ".join(describe(member) for member in leaf.exceptions[:3])
        return f"{len(leaf.exceptions)} errors: {parts}"
    message = str(leaf)
    if not message:
        return type(leaf).__name__
    return message if bare else f"{type(leaf).__name__}: {message}"
